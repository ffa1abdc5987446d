"""3-D transposed convolution, 3x3x3 kernel, stride 2, padding 3, no bias:
(16, 32, 16, 32, 32) -> (16, 64, 27, 59, 59); weight (32, 64, 3, 3, 3).

Quirk kept from the benchmark: get_init_inputs() lists (..., stride, padding, groups) but the
sixth parameter of __init__ is output_padding, so groups=4 lands in output_padding, which is
never passed to the layer. The layer is therefore UNgrouped (groups=1) with output_padding 0.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 padding: int = 0, output_padding: int = 0, groups: int = 1, bias: bool = False):
        super().__init__()
        # output_padding is accepted above but, as in the original, never passed on
        self.conv_transpose3d = nn.ConvTranspose3d(
            in_channels, out_channels, kernel_size=(kernel_size, kernel_size, kernel_size),
            stride=stride, padding=padding, groups=groups, bias=bias)

    def forward(self, x):
        return self.conv_transpose3d(x)


batch_size = 16
in_channels = 32
out_channels = 64
kernel_size = 3
depth = 16
height = 32
width = 32
stride = 2
padding = 3
groups = 4


def get_inputs():
    x = torch.randn(batch_size, in_channels, depth, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, groups]
