"""Exact-fp32 ConvTranspose3d: cuDNN with TF32 turned off for this call only.

ConvTranspose3d (16, 3, 32, 32, 32) -> (16, 64, 34, 34, 34), kernel 3: 2.72 G multiply-adds and a
161 MB output. Eager runs cuDNN with TF32 (PyTorch's default for convolutions), ~1e-3 relative
error, which fails the strict fp32 tolerance. The simplest correct version is the same cuDNN call
with allow_tf32 = False inside forward (the previous value restored afterwards), so cuDNN picks an
fp32 CUDA-core algorithm. That needs at least 2.72 G / (132 SMs x 128 lanes x ~1.75 GHz) ~ 92 us of
FMA issue against ~14 us of dense TF32 tensor-core work and ~39 us of output writes for eager, so it
was expected to trail eager by about the fp32/TF32 throughput ratio (~0.26x). Measured on the H200:
0.24x vs eager (7.512 ms against 1.771 ms). Eager's TF32 error is 18x the strict tolerance, so this
strict-fp32 call races a faster, less exact path. It is the baseline the 3xTF32 variant improves on
(0.93x), and the fallback if cuDNN ever picks a TF32 algorithm whose error the 3xTF32 split cannot
remove.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 padding: int = 0, output_padding: int = 0, groups: int = 1, bias: bool = False):
        super().__init__()
        self.conv_transpose3d = nn.ConvTranspose3d(
            in_channels, out_channels, kernel_size=(kernel_size, kernel_size, kernel_size),
            stride=stride, padding=padding, output_padding=output_padding, groups=groups, bias=bias)

    def forward(self, x):
        prev = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # exact fp32 for this call only
        try:
            return self.conv_transpose3d(x)
        finally:
            torch.backends.cudnn.allow_tf32 = prev
