"""Exact-fp32 ConvTranspose2d: cuDNN with TF32 turned off for this call only.

ConvTranspose2d (16, 32, 128, 256) -> (16, 64, 128, 256), kernel (3, 5), padding (1, 2): 16.11 G
multiply-adds and a 134 MB output. Eager runs cuDNN with TF32 (PyTorch's default for convolutions),
~1e-3 relative error, which fails the strict fp32 tolerance. The simplest correct version is the
same cuDNN call with allow_tf32 = False inside forward (the previous value restored afterwards), so
cuDNN picks an fp32 CUDA-core algorithm. That needs at least 16.11 G / (132 SMs x 128 lanes x ~1.75
GHz) ~ 544 us of FMA issue against ~81 us of dense TF32 tensor-core work and ~33 us of output writes
for eager, so it was expected to trail eager by about the fp32/TF32 throughput ratio (~0.09x).
Measured on the H200: 0.25x vs eager (1.544 ms against 0.391 ms), a smaller gap than that ratio:
eager took far longer than its ~81 us floor estimated above, and why is unexplained. Eager's TF32
error is 14x the strict tolerance, so this strict-fp32 call races a faster, less exact path. It is
the baseline the 3xTF32 variant improves on (0.40x), and the fallback if cuDNN ever picks a TF32
algorithm whose error the 3xTF32 split cannot remove.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: tuple,
                 stride: tuple = (1, 1), padding: tuple = (0, 0), bias: bool = False):
        super().__init__()
        self.conv_transpose2d = nn.ConvTranspose2d(in_channels, out_channels, kernel_size,
                                                   stride=stride, padding=padding, bias=bias)

    def forward(self, x):
        prev = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # exact fp32 for this call only
        try:
            return self.conv_transpose2d(x)
        finally:
            torch.backends.cudnn.allow_tf32 = prev
