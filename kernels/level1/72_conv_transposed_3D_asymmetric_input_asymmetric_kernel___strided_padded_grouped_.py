"""3xTF32 ConvTranspose3d: tensor-core speed at fp32 accuracy, in one cuDNN call.

ConvTranspose3d (16, 32, 16, 32, 64) -> (16, 64, 32, 64, 128), kernel (3, 5, 7), stride (2, 2, 2),
padding (1, 2, 3), output padding (1, 1, 1), 4 groups: 28.19 G multiply-adds and a 1074 MB output.
Eager lets cuDNN use TF32 (PyTorch's default for convolutions); a TF32 algorithm has ~1e-3 relative
error, which fails the strict fp32 tolerance. Exact fp32 on the CUDA cores needs at least 28.19 G /
(132 SMs x 128 lanes x ~1.75 GHz) ~ 952 us, against ~141 us of dense TF32 tensor-core work (~400
TFLOP/s) and ~262 us to write the output, so a TF32 path's floor is ~262 us and no exact-fp32
CUDA-core kernel can reach it. This version keeps the tensor cores and recovers the lost bits: each
operand is split as x = hi + lo, where hi keeps the top 11 significant bits (the low 13 mantissa
bits cleared, so hi is exact in TF32) and lo = x - hi; then x w ~ hi_x hi_w + hi_x lo_w + lo_x hi_w,
dropping only lo_x lo_w (~2^-22 relative). The three products run as ONE convolution with three
times the input channels -- input [hi_x, hi_x, lo_x] (per group) against weight [hi_w, lo_w, hi_w]
-- so cuDNN accumulates all of them in fp32 in a single pass; hi x hi products are exact and the
error is at fp32 level (~1e-6 relative). The cost is ~3x that tensor-core work (~423 us) plus the
split and concatenation passes over the 67 MB input; the estimate takes the conv to be bound by
tensor-core work, which this triples. Measured on the H200: 0.95x vs eager (24.38 ms against 23.13
ms) -- eager's own error here was under 1% of the strict tolerance, so for this grouped, strided
shape cuDNN apparently ran an fp32 algorithm even with TF32 allowed, and both calls took far longer
than the estimates above (why is unexplained); the plain TF32-off variant ties eager (1.00x).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def split_tf32(t):
    """t = hi + lo, with hi exactly representable in TF32 (the low 13 mantissa bits cleared)."""
    hi = (t.view(torch.int32) & -8192).view(torch.float32)
    return hi, t - hi


def cat3(a, b, c, groups, dim):
    """Concatenate a, b, c along channel dim `dim`, group by group (so groups stay aligned)."""
    if groups == 1:
        return torch.cat((a, b, c), dim)
    s = a.shape
    g = s[:dim] + (groups, s[dim] // groups) + s[dim + 1:]
    out = torch.cat((a.reshape(g), b.reshape(g), c.reshape(g)), dim + 1)
    return out.reshape(s[:dim] + (3 * s[dim],) + s[dim + 1:])


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
        c = self.conv_transpose3d
        xh, xl = split_tf32(x)
        wh, wl = split_tf32(c.weight)
        x3 = cat3(xh, xh, xl, c.groups, 1)  # (N, 3 C_in, ...): per group [hi, hi, lo]
        w3 = cat3(wh, wl, wh, c.groups, 0)  # weight (C_in, C_out / groups, ...)
        return F.conv_transpose3d(x3, w3, c.bias, c.stride, c.padding, c.output_padding, c.groups,
                                  c.dilation)
