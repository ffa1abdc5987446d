"""Exact-fp32 ConvTranspose3d: cuDNN with TF32 turned off for this call only.

ConvTranspose3d (16, 32, 16, 32, 64) -> (16, 16, 18, 34, 66), kernel 3: 7.25 G multiply-adds and a
41 MB output. Eager runs cuDNN with TF32 (PyTorch's default for convolutions), ~1e-3 relative error,
which fails the strict fp32 tolerance. The simplest correct version is the same cuDNN call with
allow_tf32 = False inside forward (the previous value restored afterwards), so cuDNN picks an fp32
CUDA-core algorithm. That needs at least 7.25 G / (132 SMs x 128 lanes x ~1.75 GHz) ~ 245 us of FMA
issue against ~36 us of dense TF32 tensor-core work and ~10 us of output writes for eager, so it was
expected to trail eager by about the fp32/TF32 throughput ratio (~0.09x). Measured on the H200:
0.63x vs eager (1.978 ms against 1.242 ms), a smaller gap than that ratio: eager took far longer
than its ~36 us floor estimated above, and why is unexplained. Eager's TF32 error is 15x the strict
tolerance, so this strict-fp32 call races a faster, less exact path. Here it measured faster than
the 3xTF32 variant (0.31x); it is also the fallback if cuDNN ever picks a TF32 algorithm whose error
the 3xTF32 split cannot remove.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 padding: int = 0, output_padding: int = 0, dilation: int = 1, groups: int = 1,
                 bias: bool = False):
        super().__init__()
        self.conv_transpose3d = nn.ConvTranspose3d(in_channels, out_channels,
                                                   (kernel_size, kernel_size, kernel_size),
                                                   stride=stride, padding=padding,
                                                   output_padding=output_padding, dilation=dilation,
                                                   groups=groups, bias=bias)

    def forward(self, x):
        prev = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # exact fp32 for this call only
        try:
            return self.conv_transpose3d(x)
        finally:
            torch.backends.cudnn.allow_tf32 = prev
