"""InstanceNorm2d of a (batch_size, features, dim1, dim2) input: per (n, c), normalise over H, W.

No affine parameters and no running statistics, so training and eval mode agree.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, num_features: int):
        super().__init__()
        self.inorm = nn.InstanceNorm2d(num_features=num_features)  # eps=1e-5, biased variance

    def forward(self, x):
        return self.inorm(x)


batch_size = 16
features = 64
dim1 = 256
dim2 = 256


def get_inputs():
    x = torch.randn(batch_size, features, dim1, dim2)
    return [x]


def get_init_inputs():
    return [features]
