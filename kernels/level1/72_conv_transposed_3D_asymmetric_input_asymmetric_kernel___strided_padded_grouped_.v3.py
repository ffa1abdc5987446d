"""Exact-fp32 transposed convolution (v2) with cuDNN's autotuner on for the call.

v2 runs the same cuDNN call as eager with TF32 off (exact fp32) and ties with eager: here eager's
TF32 buys it nothing. Both let PyTorch pick cuDNN's algorithm by heuristics. This version also turns
on torch.backends.cudnn.benchmark for its own call (both flags restored after; the judge resets
every flag before each call anyway): the first call of each shape times cuDNN's candidate
algorithms and keeps the fastest, and later calls of that shape reuse it.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: tuple,
                 stride: tuple = (1, 1, 1), padding: tuple = (0, 0, 0),
                 output_padding: tuple = (0, 0, 0), groups: int = 1, bias: bool = False):
        super().__init__()
        self.conv_transpose3d = nn.ConvTranspose3d(in_channels, out_channels, kernel_size,
                                                   stride=stride, padding=padding,
                                                   output_padding=output_padding, groups=groups,
                                                   bias=bias)

    def forward(self, x):
        b = torch.backends.cudnn
        saved = b.benchmark, b.allow_tf32
        b.benchmark, b.allow_tf32 = True, False  # autotuned exact fp32, for this call only
        try:
            return self.conv_transpose3d(x)
        finally:
            b.benchmark, b.allow_tf32 = saved
