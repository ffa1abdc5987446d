"""2-D transposed convolution, (3, 5) kernel, stride (2, 3), padding (1, 2), dilation (2, 1),
4 groups, no bias: (16, 32, 128, 256) -> (16, 64, 257, 766); weight (32, 16, 3, 5).
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: tuple,
                 stride: tuple = (1, 1), padding: tuple = (0, 0), dilation: tuple = (1, 1),
                 groups: int = 1, bias: bool = False):
        super().__init__()
        self.conv_transpose2d = nn.ConvTranspose2d(in_channels, out_channels, kernel_size,
                                                   stride=stride, padding=padding,
                                                   dilation=dilation, groups=groups, bias=bias)

    def forward(self, x):
        # per dim: out = (in - 1) * stride - 2 * padding + dilation * (k - 1) + 1
        return self.conv_transpose2d(x)


batch_size = 16
in_channels = 32
out_channels = 64
kernel_size = (3, 5)
height = 128
width = 256
stride = (2, 3)
padding = (1, 2)
dilation = (2, 1)
groups = 4


def get_inputs():
    x = torch.randn(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, dilation, groups]
