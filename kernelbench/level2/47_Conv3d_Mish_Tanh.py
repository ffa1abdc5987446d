"""Conv3d, Mish, tanh: (batch, 3, 16, 32, 32) -> (batch, 16, 14, 30, 30).

The benchmark passes three init arguments, so stride=1 and padding=0 are the defaults.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size, stride=stride, padding=padding)

    def forward(self, x):
        x = self.conv(x)
        x = F.mish(x)
        x = torch.tanh(x)
        return x


batch_size = 16
in_channels = 3
out_channels = 16
D = 16
H = 32
W = 32
kernel_size = 3


def get_inputs():
    return [torch.randn(batch_size, in_channels, D, H, W)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
