"""ConvTranspose3d, BatchNorm3d, two AvgPool3d: (batch, 3, 32, 32, 32) -> (batch, 16, 15, 15, 15).

BatchNorm is in training mode (the benchmark never calls eval()): it normalizes with the batch's
own statistics, so each output depends on the whole batch, and it updates its running buffers as
a side effect. The `bias_shape` init argument is unused (no bias parameter), as in the original.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, bias_shape):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride, padding=padding)
        self.batch_norm = nn.BatchNorm3d(out_channels)
        self.avg_pool1 = nn.AvgPool3d(kernel_size=2)
        self.avg_pool2 = nn.AvgPool3d(kernel_size=2)

    def forward(self, x):
        x = self.conv_transpose(x)  # (B, C, 63, 63, 63)
        x = self.batch_norm(x)
        x = self.avg_pool1(x)  # (B, C, 31, 31, 31)
        x = self.avg_pool2(x)  # (B, C, 15, 15, 15)
        return x


batch_size = 128
in_channels = 3
out_channels = 16
depth = 32
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
