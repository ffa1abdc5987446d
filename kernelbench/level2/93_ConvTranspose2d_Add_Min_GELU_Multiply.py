"""ConvTranspose2d (padding 0), add a constant, min with 0, GELU, multiply: (batch, 32, 32, 32) -> (batch, 16, 66, 66).

Outputs are <= 0 (GELU of non-positive values, times 2) but not constant.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, add_value, multiply_value):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride)
        self.add_value = add_value
        self.multiply_value = multiply_value

    def forward(self, x):
        x = self.conv_transpose(x)
        x = x + self.add_value
        x = torch.min(x, torch.tensor(0.0))  # elementwise, against a 0-dim tensor
        x = F.gelu(x)
        x = x * self.multiply_value
        return x


batch_size = 128
in_channels = 32
out_channels = 16
height = 32
width = 32
kernel_size = 4
stride = 2
add_value = 0.5
multiply_value = 2.0


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, add_value, multiply_value]
