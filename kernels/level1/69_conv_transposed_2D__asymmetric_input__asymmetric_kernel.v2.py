"""Exact-fp32 ConvTranspose2d: cuDNN with TF32 turned off for this call only.

ConvTranspose2d (16, 32, 16, 32) -> (16, 64, 18, 36), kernel (3, 5): 0.25 G multiply-adds and a 3 MB
output. Eager runs cuDNN with TF32 (PyTorch's default for convolutions), ~1e-3 relative error, which
fails the strict fp32 tolerance. The simplest correct version is the same cuDNN call with allow_tf32
= False inside forward (the previous value restored afterwards), so cuDNN picks an fp32 CUDA-core
algorithm. That needs at least 0.25 G / (132 SMs x 128 lanes x ~1.75 GHz) ~ 9 us of FMA issue
against ~1 us of dense TF32 tensor-core work and ~1 us of output writes for eager, so it was
expected to trail eager by about the fp32/TF32 throughput ratio (~0.09x). Measured on the H200:
0.64x vs eager (0.131 ms against 0.084 ms), a smaller gap than that ratio: eager took far longer
than its ~1 us floor estimated above, and why is unexplained. Eager's TF32 error is 13x the strict
tolerance, so this strict-fp32 call races a faster, less exact path. Here it measured faster than
the 3xTF32 variant (0.39x); it is also the fallback if cuDNN ever picks a TF32 algorithm whose error
the 3xTF32 split cannot remove.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: tuple,
                 stride: tuple = (1, 1), padding: tuple = (0, 0), output_padding: tuple = (0, 0),
                 dilation: tuple = (1, 1), groups: int = 1, bias: bool = False):
        super().__init__()
        self.conv_transpose2d = nn.ConvTranspose2d(in_channels, out_channels, kernel_size,
                                                   stride=stride, padding=padding,
                                                   output_padding=output_padding, dilation=dilation,
                                                   groups=groups, bias=bias)

    def forward(self, x):
        prev = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # exact fp32 for this call only
        try:
            return self.conv_transpose2d(x)
        finally:
            torch.backends.cudnn.allow_tf32 = prev
