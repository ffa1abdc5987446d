"""BatchNorm2d over the channels of a (batch_size, features, dim1, dim2) input.

Quirk kept from the benchmark: nobody calls .eval(), so the module runs in training mode. It
normalises with the current batch's statistics (biased variance over N, H, W per channel) and
every call updates running_mean / running_var (momentum 0.1) and num_batches_tracked. Weight and
bias start as ones and zeros, so the output is the plain batch-normalised x.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, num_features: int):
        super().__init__()
        self.bn = nn.BatchNorm2d(num_features=num_features)  # eps=1e-5, momentum=0.1

    def forward(self, x):
        return self.bn(x)


batch_size = 16
features = 64
dim1 = 256
dim2 = 256


def get_inputs():
    x = torch.randn(batch_size, features, dim1, dim2)
    return [x]


def get_init_inputs():
    return [features]
