"""Pointwise (1x1) 2-D convolution, no bias: (16, 3, 256, 256) -> (16, 64, 256, 256).

The attribute is named conv1d (as in the original) but it is a 2-D conv; weight (64, 3, 1, 1).
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, bias: bool = False):
        super().__init__()
        self.conv1d = nn.Conv2d(in_channels, out_channels, kernel_size=1, stride=1, padding=0,
                                bias=bias)

    def forward(self, x):
        # out[n, o, h, w] = sum_c weight[o, c, 0, 0] * x[n, c, h, w]
        return self.conv1d(x)


batch_size = 16
in_channels = 3
out_channels = 64
width = 256
height = 256


def get_inputs():
    x = torch.randn(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels]
