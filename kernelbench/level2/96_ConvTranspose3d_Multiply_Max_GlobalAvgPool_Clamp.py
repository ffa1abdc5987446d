"""ConvTranspose3d, scale, MaxPool3d, global average pool, clamp to [0, 1].

(batch, 3, 16, 32, 32) -> (batch, 16, 1, 1, 1).
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, scale, maxpool_kernel_size):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride, padding=padding)
        self.scale = scale
        self.maxpool = nn.MaxPool3d(kernel_size=maxpool_kernel_size)
        self.global_avg_pool = nn.AdaptiveAvgPool3d((1, 1, 1))
        self.clamp_min = 0  # fixed, not init arguments
        self.clamp_max = 1

    def forward(self, x):
        x = self.conv_transpose(x)  # (B, C, 31, 63, 63)
        x = x * self.scale
        x = self.maxpool(x)  # (B, C, 15, 31, 31)
        x = self.global_avg_pool(x)  # (B, C, 1, 1, 1)
        x = torch.clamp(x, min=self.clamp_min, max=self.clamp_max)
        return x


batch_size = 128
in_channels = 3
out_channels = 16
depth = 16
height = 32
width = 32
kernel_size = 3
stride = 2
padding = 1
scale = 0.5
maxpool_kernel_size = 2


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, scale, maxpool_kernel_size]
