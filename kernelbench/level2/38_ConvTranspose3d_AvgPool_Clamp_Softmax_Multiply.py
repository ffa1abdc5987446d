"""ConvTranspose3d, AvgPool3d, clamp to [0, 1], softmax over channels, times 2.

(batch, 8, 16, 32, 32) -> (batch, 16, 16, 32, 32). Outputs cluster near 2/16 = 0.125
(~0.115-0.161), so a loose-tolerance check says little.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, pool_kernel_size, clamp_min, clamp_max):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.avg_pool = nn.AvgPool3d(pool_kernel_size)
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max

    def forward(self, x):
        x = self.conv_transpose(x)  # (B, C, 32, 64, 64)
        x = self.avg_pool(x)  # (B, C, 16, 32, 32)
        x = torch.clamp(x, self.clamp_min, self.clamp_max)
        x = torch.softmax(x, dim=1)
        x = x * 2
        return x


batch_size = 16
in_channels = 8
out_channels = 16
depth = 16
height = 32
width = 32
kernel_size = 3
stride = 2
padding = 1
output_padding = 1
pool_kernel_size = 2
clamp_min = 0.0
clamp_max = 1.0


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, output_padding, pool_kernel_size, clamp_min, clamp_max]
