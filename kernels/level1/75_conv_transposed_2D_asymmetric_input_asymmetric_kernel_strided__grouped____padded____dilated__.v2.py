"""Exact-fp32 ConvTranspose2d: cuDNN with TF32 turned off for this call only.

ConvTranspose2d (16, 32, 128, 256) -> (16, 64, 257, 766), kernel (3, 5), stride (2, 3), padding (1,
2), dilation (2, 1), 4 groups: 4.03 G multiply-adds and a 806 MB output. Eager lets cuDNN use TF32
(PyTorch's default for convolutions); a TF32 algorithm has ~1e-3 relative error, which fails the
strict fp32 tolerance. The simplest correct version is the same cuDNN call with allow_tf32 = False
inside forward (the previous value restored afterwards), so cuDNN picks an fp32 CUDA-core
algorithm. That needs at least 4.03 G / (132 SMs x 128 lanes x ~1.75 GHz) ~ 136 us of FMA issue
against ~20 us of dense TF32 tensor-core work and ~197 us of output writes for a TF32 path.
Measured on the H200: 1.00x vs eager (5.721 ms against 5.713 ms) -- eager's own error here was under
1% of the strict tolerance, so for this grouped, strided shape cuDNN apparently ran an fp32
algorithm even with TF32 allowed, and this call ties it; both took far longer than the FMA bound
above, and why is unexplained. It measured faster than the 3xTF32 variant (0.94x), and it is the
fallback if cuDNN ever picks a TF32 algorithm whose error the 3xTF32 split cannot remove.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: tuple,
                 stride: tuple = (1, 1), padding: tuple = (0, 0), dilation: tuple = (1, 1),
                 groups: int = 1, bias: bool = False):
        super().__init__()
        self.conv_transpose2d = nn.ConvTranspose2d(in_channels, out_channels, kernel_size,
                                                   stride=stride, padding=padding,
                                                   dilation=dilation, groups=groups, bias=bias)

    def forward(self, x):
        prev = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # exact fp32 for this call only
        try:
            return self.conv_transpose2d(x)
        finally:
            torch.backends.cudnn.allow_tf32 = prev
