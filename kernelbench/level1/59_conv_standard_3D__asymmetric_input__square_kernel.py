"""3-D convolution with a (3, 3, 1) kernel, no bias:
(16, 3, 256, 256, 10) -> (16, 64, 254, 254, 10).

The kernel has size 1 along the LAST spatial dim, so this is a 2-D conv over dims 2, 3
applied to each of the 10 slices of the last dim. The input is laid out (height, width, depth).
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 padding: int = 0, dilation: int = 1, groups: int = 1, bias: bool = False):
        super().__init__()
        self.conv3d = nn.Conv3d(in_channels, out_channels, (kernel_size, kernel_size, 1),
                                stride=stride, padding=padding, dilation=dilation, groups=groups,
                                bias=bias)

    def forward(self, x):
        return self.conv3d(x)


batch_size = 16
in_channels = 3
out_channels = 64
kernel_size = 3
width = 256
height = 256
depth = 10


def get_inputs():
    x = torch.randn(batch_size, in_channels, height, width, depth)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
