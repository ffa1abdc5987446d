"""Depthwise 2-D convolution with a vertical (3, 1) kernel, no bias:
(16, 3, 256, 256) -> (16, 3, 254, 256); weight (3, 1, 3, 1).
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels: int, kernel_size: int, stride: int = 1, padding: int = 0,
                 dilation: int = 1, bias: bool = False):
        super().__init__()
        self.conv2d = nn.Conv2d(in_channels, in_channels, kernel_size=(kernel_size, 1),
                                stride=stride, padding=padding, dilation=dilation,
                                groups=in_channels, bias=bias)

    def forward(self, x):
        return self.conv2d(x)


batch_size = 16
in_channels = 3
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
    return [in_channels, kernel_size, stride, padding, dilation]
