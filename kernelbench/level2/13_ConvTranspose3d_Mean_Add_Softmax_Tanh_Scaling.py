"""ConvTranspose3d, channel mean, add bias, softmax over channels, tanh, scale.

(batch, 8, 16, 32, 32) -> (batch, 1, 31, 63, 63). Quirk of the original, kept on purpose: after
the keepdim channel mean, dim 1 has size 1, so the softmax is exactly 1.0 and every output equals
tanh(1) * scaling_factor = 2 tanh(1) ~= 1.5232, whatever the input and weights.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, bias_shape, scaling_factor):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride, padding=padding)
        self.bias = nn.Parameter(torch.randn(bias_shape))  # (1, 1, 1, 1, 1)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        x = self.conv_transpose(x)  # (B, C, 31, 63, 63)
        x = torch.mean(x, dim=1, keepdim=True)  # (B, 1, 31, 63, 63)
        x = x + self.bias
        x = torch.softmax(x, dim=1)  # softmax over one element: exactly 1.0
        x = torch.tanh(x)
        x = x * self.scaling_factor
        return x


batch_size = 16
in_channels = 8
out_channels = 16
depth = 16
height = 32
width = 32
kernel_size = 3
stride = 2
padding = 1
bias_shape = (1, 1, 1, 1, 1)
scaling_factor = 2.0


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, bias_shape, scaling_factor]
