"""AvgPool2d with a 3x3 window on a (batch_size, channels, height, width) input.

stride=None means stride = kernel_size: non-overlapping windows, no padding, so a 256 x 256
input gives (16, 64, 85, 85) and its last row and column are dropped.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, kernel_size: int, stride: int = None, padding: int = 0):
        super().__init__()
        self.avg_pool = nn.AvgPool2d(kernel_size=kernel_size, stride=stride, padding=padding)

    def forward(self, x):
        return self.avg_pool(x)


batch_size = 16
channels = 64
height = 256
width = 256
kernel_size = 3


def get_inputs():
    x = torch.randn(batch_size, channels, height, width)
    return [x]


def get_init_inputs():
    return [kernel_size]
