"""Linear layer, multiply by a learned per-feature scale, BatchNorm1d: (batch, 1024) -> (batch, 512).

BatchNorm is in training mode (the benchmark never calls eval()): it normalizes with the batch's
own statistics, so each output depends on the whole batch, and it updates its running buffers as
a side effect. Tasks 33 and 39 of KernelBench are the same program.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features, scale_shape, eps=1e-5, momentum=0.1):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.scale = nn.Parameter(torch.randn(scale_shape))
        self.bn = nn.BatchNorm1d(out_features, eps=eps, momentum=momentum)

    def forward(self, x):
        x = self.gemm(x)
        x = x * self.scale
        x = self.bn(x)
        return x


batch_size = 128
in_features = 1024
out_features = 512
scale_shape = (out_features,)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, scale_shape]
