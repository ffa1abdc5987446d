"""ConvTranspose2d, min over channels, sum over height, GELU, add bias.

(batch, 3, 32, 32) -> (batch, 16, 1, 64). Quirk of the original, kept on purpose: the (16, 1, 1)
bias is added to a (batch, 1, 1, 64) tensor, and the broadcast brings the channel dim back.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, bias_shape):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride, padding, output_padding)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        x = self.conv_transpose(x)  # (B, C, 64, 64)
        x = torch.min(x, dim=1, keepdim=True).values  # (B, 1, 64, 64)
        x = torch.sum(x, dim=2, keepdim=True)  # (B, 1, 1, 64)
        x = F.gelu(x)
        x = x + self.bias  # broadcasts to (B, C, 1, 64)
        return x


batch_size = 128
in_channels = 3
out_channels = 16
height = 32
width = 32
kernel_size = 3
stride = 2
padding = 1
output_padding = 1
bias_shape = (out_channels, 1, 1)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, output_padding, bias_shape]
