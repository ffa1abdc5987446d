"""LogSoftmax over the features of a (batch_size, dim) input: x - logsumexp(x, dim=1).

get_init_inputs() is empty, so the default dim = 1 is used.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim: int = 1):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.log_softmax(x, dim=self.dim)


batch_size = 16
dim = 16384


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
