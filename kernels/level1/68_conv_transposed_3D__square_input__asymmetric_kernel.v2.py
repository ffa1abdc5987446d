"""Exact-fp32 ConvTranspose3d: cuDNN with TF32 turned off for this call only.

ConvTranspose3d (16, 32, 64, 64, 64) -> (16, 64, 66, 68, 68), kernel (3, 5, 5): 644.25 G
multiply-adds and a 1250 MB output. Eager runs cuDNN with TF32 (PyTorch's default for convolutions),
~1e-3 relative error, which fails the strict fp32 tolerance. The simplest correct version is the
same cuDNN call with allow_tf32 = False inside forward (the previous value restored afterwards), so
cuDNN picks an fp32 CUDA-core algorithm. That needs at least 644.25 G / (132 SMs x 128 lanes x ~1.75
GHz) ~ 21765 us of FMA issue against ~3221 us of dense TF32 tensor-core work and ~305 us of output
writes for eager, so it was expected to trail eager by about the fp32/TF32 throughput ratio
(~0.09x). Measured on the H200: 0.19x vs eager (185.25 ms against 35.88 ms), a smaller gap than that
ratio: eager took far longer than its ~3221 us floor estimated above, and why is unexplained.
Eager's TF32 error is 16x the strict tolerance, so this strict-fp32 call races a faster, less exact
path. It is the baseline the 3xTF32 variant improves on (0.59x), and the fallback if cuDNN ever
picks a TF32 algorithm whose error the 3xTF32 split cannot remove.
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
        prev = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # exact fp32 for this call only
        try:
            return self.conv_transpose3d(x)
        finally:
            torch.backends.cudnn.allow_tf32 = prev
