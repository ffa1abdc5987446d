"""Exact-fp32 ConvTranspose2d: cuDNN with TF32 turned off for this call only.

ConvTranspose2d (16, 32, 128, 128) -> (16, 64, 130, 132), kernel (3, 5): 8.05 G multiply-adds and a
70 MB output. Eager runs cuDNN with TF32 (PyTorch's default for convolutions), ~1e-3 relative error,
which fails the strict fp32 tolerance. The simplest correct version is the same cuDNN call with
allow_tf32 = False inside forward (the previous value restored afterwards), so cuDNN picks an fp32
CUDA-core algorithm. That needs at least 8.05 G / (132 SMs x 128 lanes x ~1.75 GHz) ~ 272 us of FMA
issue against ~40 us of dense TF32 tensor-core work and ~17 us of output writes for eager, so it was
expected to trail eager by about the fp32/TF32 throughput ratio (~0.09x). Measured on the H200:
0.29x vs eager (0.787 ms against 0.225 ms), a smaller gap than that ratio: eager took far longer
than its ~40 us floor estimated above, and why is unexplained. Eager's TF32 error is 15x the strict
tolerance, so this strict-fp32 call races a faster, less exact path. It is the baseline the 3xTF32
variant improves on (0.39x), and the fallback if cuDNN ever picks a TF32 algorithm whose error the
3xTF32 split cannot remove.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: tuple, stride: int = 1,
                 padding: int = 0, output_padding: int = 0, groups: int = 1, bias: bool = False):
        super().__init__()
        self.conv_transpose2d = nn.ConvTranspose2d(in_channels, out_channels, kernel_size,
                                                   stride=stride, padding=padding,
                                                   output_padding=output_padding, groups=groups,
                                                   bias=bias)

    def forward(self, x):
        prev = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # exact fp32 for this call only
        try:
            return self.conv_transpose2d(x)
        finally:
            torch.backends.cudnn.allow_tf32 = prev
