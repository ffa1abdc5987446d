"""Conv2d, divide by a constant, LeakyReLU(0.01): (batch, 3, 32, 32) -> (batch, 16, 30, 30).

`divisor` is the Python int 2; the result stays float32.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, divisor):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.divisor = divisor

    def forward(self, x):
        x = self.conv(x)
        x = x / self.divisor
        x = F.leaky_relu(x, negative_slope=0.01)
        return x


batch_size = 128
in_channels = 3
out_channels = 16
height = 32
width = 32
kernel_size = 3
divisor = 2


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, divisor]
