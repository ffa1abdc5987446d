"""ConvTranspose3d, add a learned scalar, LayerNorm, AvgPool3d, GELU.

(batch, 32, 16, 32, 32) -> conv-transpose (batch, 64, 32, 64, 64) -> (batch, 64, 16, 32, 32).
Quirks of the original, kept on purpose: LayerNorm(norm_shape=(64,)) normalizes the LAST dim,
which is the width (64 only by coincidence equal to out_channels), not the channels; and the
scalar sum_weight added just before it is cancelled by the mean subtraction.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, sum_weight, norm_shape, pool_kernel_size):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.sum_weight = nn.Parameter(torch.tensor(sum_weight))  # 0-dim
        self.norm = nn.LayerNorm(norm_shape)
        self.avg_pool = nn.AvgPool3d(kernel_size=pool_kernel_size)
        self.gelu = nn.GELU()

    def forward(self, x):
        x = self.conv_transpose(x)  # (B, C, 2D, 2H, 2W)
        x = x + self.sum_weight
        x = self.norm(x)  # over the width, see the docstring
        x = self.avg_pool(x)
        x = self.gelu(x)
        return x


batch_size = 128
in_channels = 32
out_channels = 64
depth = 16
height = 32
width = 32
kernel_size = (3, 3, 3)
stride = (2, 2, 2)
padding = (1, 1, 1)
output_padding = (1, 1, 1)
sum_weight = 1.0
norm_shape = (out_channels,)
pool_kernel_size = (2, 2, 2)


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, output_padding, sum_weight, norm_shape, pool_kernel_size]
