"""Exact-fp32 Conv3d: cuDNN with TF32 turned off for this call only.

Conv3d (16, 3, 64, 64, 64) -> (16, 64, 62, 60, 58), kernel (3, 5, 7): 69.60 G multiply-adds and a
884 MB output. Eager runs cuDNN with TF32 (PyTorch's default for convolutions), ~1e-3 relative
error, which fails the strict fp32 tolerance. The simplest correct version is the same cuDNN call
with allow_tf32 = False inside forward (the previous value restored afterwards), so cuDNN picks an
fp32 CUDA-core algorithm. That needs at least 69.60 G / (132 SMs x 128 lanes x ~1.75 GHz) ~ 2351 us
of FMA issue against ~348 us of dense TF32 tensor-core work and ~216 us of output writes for eager,
so it is slower than eager by about the fp32/TF32 throughput ratio: expect ~0.09x or less. It is
the baseline the 3xTF32 variant improves on, and the fallback if cuDNN ever picks a TF32 algorithm
whose error the 3xTF32 split cannot remove.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: tuple, stride: int = 1,
                 padding: int = 0, dilation: int = 1, groups: int = 1, bias: bool = False):
        super().__init__()
        self.conv3d = nn.Conv3d(in_channels, out_channels, kernel_size, stride=stride,
                                padding=padding, dilation=dilation, groups=groups, bias=bias)

    def forward(self, x):
        prev = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # exact fp32 for this call only
        try:
            return self.conv3d(x)
        finally:
            torch.backends.cudnn.allow_tf32 = prev
