"""ConvTranspose3d (stride 1, padding 0), scale, BatchNorm3d, global average pool.

(batch, 64, 16, 32, 32) -> (batch, 32, 1, 1, 1). BatchNorm is in training mode (the benchmark
never calls eval()): it normalizes with the batch's own statistics, so each output depends on
the whole batch (per channel the batch average of the output is ~0), and it updates its running
buffers as a side effect.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, scale_factor, eps=1e-5, momentum=0.1):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size)
        self.scale_factor = scale_factor
        self.batch_norm = nn.BatchNorm3d(out_channels, eps=eps, momentum=momentum)
        self.global_avg_pool = nn.AdaptiveAvgPool3d((1, 1, 1))

    def forward(self, x):
        x = self.conv_transpose(x)  # (B, C, 18, 34, 34)
        x = x * self.scale_factor
        x = self.batch_norm(x)
        x = self.global_avg_pool(x)  # (B, C, 1, 1, 1)
        return x


batch_size = 16
in_channels = 64
out_channels = 32
depth = 16
height = 32
width = 32
kernel_size = 3
scale_factor = 2.0


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, scale_factor]
