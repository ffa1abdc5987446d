"""1-D transposed convolution, kernel 3, no bias: (16, 64, 128) -> (16, 3, 130).

Weight layout (in_channels, out_channels, k) = (64, 3, 3).
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 padding: int = 0, output_padding: int = 0, groups: int = 1, bias: bool = False):
        super().__init__()
        self.conv1d_transpose = nn.ConvTranspose1d(in_channels, out_channels, kernel_size,
                                                   stride=stride, padding=padding,
                                                   output_padding=output_padding, groups=groups,
                                                   bias=bias)

    def forward(self, x):
        return self.conv1d_transpose(x)


batch_size = 16
in_channels = 64
out_channels = 3
kernel_size = 3
length = 128


def get_inputs():
    x = torch.randn(batch_size, in_channels, length)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
