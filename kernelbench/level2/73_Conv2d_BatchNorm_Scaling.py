"""Conv2d, BatchNorm2d, scale: (batch, 3, 32, 32) -> (batch, 16, 30, 30).

BatchNorm is in training mode (the benchmark never calls eval()): it normalizes with the batch's
own statistics, so each output depends on the whole batch, and it updates its running buffers as
a side effect.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, scaling_factor):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bn = nn.BatchNorm2d(out_channels)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        x = self.conv(x)
        x = self.bn(x)
        x = x * self.scaling_factor
        return x


batch_size = 128
in_channels = 3
out_channels = 16
height = 32
width = 32
kernel_size = 3
scaling_factor = 2.0


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, scaling_factor]
