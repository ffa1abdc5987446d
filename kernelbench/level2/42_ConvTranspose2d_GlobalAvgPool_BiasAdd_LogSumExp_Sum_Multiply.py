"""ConvTranspose2d (stride 1, padding 0), global average pool, add bias, logsumexp over channels, times 10.

(batch, 3, 32, 32) -> (batch, 1).
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        x = self.conv_transpose(x)  # (B, C, 34, 34)
        x = torch.mean(x, dim=(2, 3), keepdim=True)  # (B, C, 1, 1)
        x = x + self.bias
        x = torch.logsumexp(x, dim=1, keepdim=True)  # (B, 1, 1, 1)
        x = torch.sum(x, dim=(2, 3))  # (B, 1)
        x = x * 10.0
        return x


batch_size = 128
in_channels = 3
out_channels = 16
height = 32
width = 32
kernel_size = 3
bias_shape = (out_channels, 1, 1)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, bias_shape]
