"""Conv3d, ReLU, LeakyReLU, GELU, sigmoid, add a per-channel bias.

(batch, 3, 16, 32, 32) -> (batch, 16, 14, 30, 30). The LeakyReLU after the ReLU is a no-op.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        x = self.conv(x)
        x = torch.relu(x)
        x = F.leaky_relu(x, negative_slope=0.01)  # no-op: x >= 0 already
        x = F.gelu(x)
        x = torch.sigmoid(x)
        x = x + self.bias  # (C, 1, 1, 1)
        return x


batch_size = 128
in_channels = 3
out_channels = 16
depth = 16
height = 32
width = 32
kernel_size = 3
bias_shape = (out_channels, 1, 1, 1)


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, bias_shape]
