"""Conv3d, GroupNorm, min with a scalar, clamp, dropout (training mode).

(batch, 3, 16, 32, 32) -> (batch, 16, 14, 30, 30). Quirk of the original, kept on purpose:
min(x, min_value) then clamp(min=min_value) sets every element to min_value = 0.0, so the output
is all zeros for any input and weights; the live dropout (p=0.2) then has nothing to change.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, groups, min_value, max_value, dropout_p):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.norm = nn.GroupNorm(groups, out_channels)
        self.dropout = nn.Dropout(dropout_p)
        self.min_value = min_value
        self.max_value = max_value

    def forward(self, x):
        x = self.conv(x)  # (B, C, D-2, H-2, W-2)
        x = self.norm(x)
        x = torch.min(x, torch.tensor(self.min_value))  # every element <= min_value ...
        x = torch.clamp(x, min=self.min_value, max=self.max_value)  # ... so now == min_value
        x = self.dropout(x)  # stochastic, but dropout of zeros is zero
        return x


batch_size = 128
in_channels = 3
out_channels = 16
depth = 16
height = 32
width = 32
kernel_size = 3
groups = 8
min_value = 0.0
max_value = 1.0
dropout_p = 0.2


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, groups, min_value, max_value, dropout_p]
