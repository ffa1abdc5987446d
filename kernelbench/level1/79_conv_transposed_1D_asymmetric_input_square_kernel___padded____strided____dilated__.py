"""1-D transposed convolution, kernel 3, stride 2, padding 1, dilation 2, no bias:
(16, 32, 128) -> (16, 64, 257).
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 padding: int = 0, dilation: int = 1, bias: bool = False):
        super().__init__()
        self.conv1d_transpose = nn.ConvTranspose1d(in_channels, out_channels, kernel_size,
                                                   stride=stride, padding=padding,
                                                   dilation=dilation, bias=bias)

    def forward(self, x):
        return self.conv1d_transpose(x)


batch_size = 16
in_channels = 32
out_channels = 64
kernel_size = 3
length = 128
stride = 2
padding = 1
dilation = 2


def get_inputs():
    x = torch.randn(batch_size, in_channels, length)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, dilation]
