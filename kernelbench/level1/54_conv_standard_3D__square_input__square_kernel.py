"""3-D convolution, cubic kernel, no bias: (16, 3, 64, 64, 64) -> (16, 64, 62, 62, 62)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 padding: int = 0, dilation: int = 1, groups: int = 1, bias: bool = False):
        super().__init__()
        self.conv3d = nn.Conv3d(in_channels, out_channels, (kernel_size, kernel_size, kernel_size),
                                stride=stride, padding=padding, dilation=dilation, groups=groups,
                                bias=bias)

    def forward(self, x):
        return self.conv3d(x)


batch_size = 16
in_channels = 3
out_channels = 64
kernel_size = 3
depth = 64
width = 64
height = 64


def get_inputs():
    x = torch.randn(batch_size, in_channels, depth, width, height)  # the original's dim order
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
