"""Exact-fp32 ConvTranspose3d: cuDNN with TF32 turned off for this call only.

ConvTranspose3d (16, 32, 16, 32, 32) -> (16, 64, 27, 59, 59), kernel 3, stride (2, 2, 2), padding
(3, 3, 3): 14.50 G multiply-adds and a 385 MB output. Eager lets cuDNN use TF32 (PyTorch's default
for convolutions); a TF32 algorithm has ~1e-3 relative error, which fails the strict fp32 tolerance.
The simplest correct version is the same cuDNN call with allow_tf32 = False inside forward (the
previous value restored afterwards), so cuDNN picks an fp32 CUDA-core algorithm. That needs at least
14.50 G / (132 SMs x 128 lanes x ~1.75 GHz) ~ 490 us of FMA issue against ~72 us of dense TF32
tensor-core work and ~94 us of output writes for a TF32 path. Measured on the H200: 0.99x vs eager
(4.426 ms against 4.402 ms) -- eager's own error here was under 1% of the strict tolerance, so for
this grouped, strided shape cuDNN apparently ran an fp32 algorithm even with TF32 allowed, and this
call ties it; both took far longer than the FMA bound above, and why is unexplained. It measured
faster than the 3xTF32 variant (0.80x), and it is the fallback if cuDNN ever picks a TF32 algorithm
whose error the 3xTF32 split cannot remove.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 padding: int = 0, output_padding: int = 0, groups: int = 1, bias: bool = False):
        super().__init__()
        # output_padding is accepted above but, as in the original, never passed on
        self.conv_transpose3d = nn.ConvTranspose3d(
            in_channels, out_channels, kernel_size=(kernel_size, kernel_size, kernel_size),
            stride=stride, padding=padding, groups=groups, bias=bias)

    def forward(self, x):
        prev = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # exact fp32 for this call only
        try:
            return self.conv_transpose3d(x)
        finally:
            torch.backends.cudnn.allow_tf32 = prev
