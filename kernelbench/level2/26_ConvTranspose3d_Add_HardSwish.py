"""ConvTranspose3d, add a second input, then y * hardswish(y).

Inputs x (batch, 32, 16, 16, 16) and add_input (batch, 64, 32, 32, 32); output (batch, 64, 32, 32, 32).
Quirks of the original, kept on purpose: the `bias` parameter is created (it draws from the RNG
and sits in the parameter list) but never used; the last step is y * hardswish(y), not hardswish(y).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, bias_shape):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.bias = nn.Parameter(torch.randn(bias_shape))  # unused in forward

    def forward(self, x, add_input):
        x = self.conv_transpose(x)  # (B, C, 2D, 2H, 2W)
        x = x + add_input
        x = x * F.hardswish(x)
        return x


batch_size = 128
in_channels = 32
out_channels = 64
D = 16
H = 16
W = 16
kernel_size = 3
stride = 2
padding = 1
output_padding = 1
bias_shape = (out_channels, 1, 1, 1, 1)


def get_inputs():
    return [torch.randn(batch_size, in_channels, D, H, W),
            torch.randn(batch_size, out_channels, D * stride, H * stride, W * stride)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, output_padding, bias_shape]
