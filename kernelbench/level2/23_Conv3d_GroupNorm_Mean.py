"""Conv3d, GroupNorm, mean over everything but the batch: (batch, 3, 16, 32, 32) -> (batch,).

Quirk of the original, kept on purpose: GroupNorm (weight 1, bias 0 at init) makes every
equal-size group zero-mean, so the mean over channels and positions is mathematically 0; the
reference output is floating-point noise (|out| <= ~4e-9).
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, num_groups):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.group_norm = nn.GroupNorm(num_groups, out_channels)

    def forward(self, x):
        x = self.conv(x)
        x = self.group_norm(x)
        x = x.mean(dim=[1, 2, 3, 4])  # (B,); ~0, see the docstring
        return x


batch_size = 128
in_channels = 3
out_channels = 16
D = 16
H = 32
W = 32
kernel_size = 3
num_groups = 8


def get_inputs():
    return [torch.randn(batch_size, in_channels, D, H, W)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, num_groups]
