"""Exclusive prefix sum along dim 1 of a (batch_size, 4000) input, with the original's quirk.

Quirk kept from the benchmark: after prepending a zero column, the [:-1] slice cuts dim 0 (the
batch), not the scan dim. So a (128, 4000) input gives a (127, 4001) output: the last batch row
is dropped, out[i, 0] = 0, out[i, j] = sum of x[i, :j], and the last column is the full row sum.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        zeros = torch.zeros_like(x.select(self.dim, 0).unsqueeze(self.dim))  # (B, 1)
        exclusive = torch.cat((zeros, x), dim=self.dim)[:-1]  # (B - 1, L + 1): slices dim 0!
        return torch.cumsum(exclusive, dim=self.dim)


batch_size = 128
input_shape = (4000,)
dim = 1


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return [dim]
