"""Exact-fp32 ConvTranspose3d: cuDNN with TF32 turned off for this call only.

ConvTranspose3d (16, 32, 16, 32, 64) -> (16, 64, 32, 64, 128), kernel (3, 5, 7), stride (2, 2, 2),
padding (1, 2, 3), output padding (1, 1, 1), 4 groups: 28.19 G multiply-adds and a 1074 MB output.
Eager lets cuDNN use TF32 (PyTorch's default for convolutions); a TF32 algorithm has ~1e-3 relative
error, which fails the strict fp32 tolerance. The simplest correct version is the same cuDNN call
with allow_tf32 = False inside forward (the previous value restored afterwards), so cuDNN picks an
fp32 CUDA-core algorithm. That needs at least 28.19 G / (132 SMs x 128 lanes x ~1.75 GHz) ~ 952 us
of FMA issue against ~141 us of dense TF32 tensor-core work and ~262 us of output writes for a TF32
path. Measured on the H200: 1.00x vs eager (23.06 ms against 23.03 ms) -- eager's own error here was
under 1% of the strict tolerance, so for this grouped, strided shape cuDNN apparently ran an fp32
algorithm even with TF32 allowed, and this call ties it; both took far longer than the FMA bound
above, and why is unexplained. It measured faster than the 3xTF32 variant (0.95x), and it is the
fallback if cuDNN ever picks a TF32 algorithm whose error the 3xTF32 split cannot remove.
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
