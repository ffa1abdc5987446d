"""ConvTranspose2d (padding 0), GELU, GroupNorm: (batch, 32, 32, 32) -> (batch, 64, 66, 66).

The `groups` init argument is unused, as in the original.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, groups, num_groups):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride)
        self.group_norm = nn.GroupNorm(num_groups=num_groups, num_channels=out_channels)

    def forward(self, x):
        x = self.conv_transpose(x)
        x = F.gelu(x)
        x = self.group_norm(x)
        return x


batch_size = 128
in_channels = 32
out_channels = 64
height = 32
width = 32
kernel_size = 4
stride = 2
groups = 8
num_groups = 8


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, groups, num_groups]
