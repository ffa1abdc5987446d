"""ConvTranspose3d, LayerNorm, GELU, scale: (batch, 32, 16, 32, 32) -> (batch, 64, 32, 64, 64).

Quirk of the original, kept on purpose: LayerNorm(out_channels=64) normalizes the LAST dim, which
is the width (64 only by coincidence equal to out_channels), not the channels.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, bias=True, eps=1e-5, scaling_factor=1.0):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, bias=bias)
        self.layer_norm = nn.LayerNorm(out_channels, eps=eps)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        x = self.conv_transpose(x)  # (B, C, 2D, 2H, 2W)
        x = self.layer_norm(x)  # over the width, see the docstring
        x = F.gelu(x)
        x = x * self.scaling_factor
        return x


batch_size = 128
in_channels = 32
out_channels = 64
D = 16
H = 32
W = 32
kernel_size = 4
stride = 2
padding = 1
bias = True
eps = 1e-5
scaling_factor = 1.0


def get_inputs():
    return [torch.randn(batch_size, in_channels, D, H, W)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, bias, eps, scaling_factor]
