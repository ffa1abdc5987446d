"""Depthwise-separable 2-D convolution, no biases: a 3x3 depthwise conv, then a 1x1 pointwise conv.

(16, 3, 256, 256) -> depthwise (16, 3, 254, 254) -> pointwise (16, 64, 254, 254).
Parameters in creation order: depthwise.weight (3, 1, 3, 3), pointwise.weight (64, 3, 1, 1).
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 padding: int = 0, dilation: int = 1, bias: bool = False):
        super().__init__()
        self.depthwise = nn.Conv2d(in_channels, in_channels, kernel_size, stride=stride,
                                   padding=padding, dilation=dilation, groups=in_channels,
                                   bias=bias)
        self.pointwise = nn.Conv2d(in_channels, out_channels, kernel_size=1, bias=bias)

    def forward(self, x):
        x = self.depthwise(x)  # (N, C_in, H', W'), one k x k filter per channel
        x = self.pointwise(x)  # (N, C_out, H', W'), mixes channels
        return x


batch_size = 16
in_channels = 3
out_channels = 64
kernel_size = 3
width = 256
height = 256
stride = 1
padding = 0
dilation = 1


def get_inputs():
    x = torch.randn(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, dilation]
