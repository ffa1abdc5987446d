"""ConvTranspose2d, BatchNorm2d, tanh, MaxPool2d, GroupNorm: (batch, 32, 32, 32) -> (batch, 64, 32, 32).

BatchNorm is in training mode (the benchmark never calls eval()): it normalizes with the batch's
own statistics, so each output depends on the whole batch, and it updates its running buffers as
a side effect. The `groups` init argument is unused, as in the original.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, groups, num_groups):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding)
        self.batch_norm = nn.BatchNorm2d(out_channels)
        self.tanh = nn.Tanh()
        self.max_pool = nn.MaxPool2d(kernel_size=2, stride=2)
        self.group_norm = nn.GroupNorm(num_groups=num_groups, num_channels=out_channels)

    def forward(self, x):
        x = self.conv_transpose(x)  # (B, C, 64, 64)
        x = self.batch_norm(x)
        x = self.tanh(x)
        x = self.max_pool(x)  # (B, C, 32, 32)
        x = self.group_norm(x)
        return x


batch_size = 128
in_channels = 32
out_channels = 64
kernel_size = 4
stride = 2
padding = 1
groups = 8
num_groups = 4
height = 32
width = 32


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, groups, num_groups]
