"""ConvTranspose3d, logsumexp over channels, x * sigmoid(x + 3) / 6, subtract bias, clamp, max over channels.

(batch, 3, 16, 32, 32) -> (batch, 1, 31, 63, 63). Quirks of the original, kept on purpose: the
"HardSwish" is x * sigmoid(x + 3) / 6, not F.hardswish; the (16, 1, 1, 1) bias broadcasts the
single channel back to 16 before the max. The result is clamp(z - min(bias), -1, 1) with z >= ~0.43,
so for almost every randn bias (min(bias) <= -0.57) the output is EXACTLY 1.0 everywhere.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, bias_shape):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride, padding=padding)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        x = self.conv_transpose(x)  # (B, C, 31, 63, 63)
        x = torch.logsumexp(x, dim=1, keepdim=True)  # (B, 1, 31, 63, 63)
        x = x * torch.sigmoid(x + 3) / 6
        x = x - self.bias  # broadcasts to (B, C, 31, 63, 63)
        x = torch.clamp(x, min=-1, max=1)
        x = torch.max(x, dim=1, keepdim=True).values  # (B, 1, 31, 63, 63)
        return x


batch_size = 128
in_channels = 3
out_channels = 16
depth = 16
height = 32
width = 32
kernel_size = 3
stride = 2
padding = 1
bias_shape = (out_channels, 1, 1, 1)


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, bias_shape]
