"""3xTF32 ConvTranspose3d: tensor-core speed at fp32 accuracy, in one cuDNN call.

ConvTranspose3d (16, 3, 32, 32, 32) -> (16, 64, 34, 34, 34), kernel 3: 2.72 G multiply-adds and a
161 MB output. Eager runs cuDNN with TF32 (PyTorch's default for convolutions), ~1e-3 relative
error, which fails the strict fp32 tolerance. Exact fp32 on the CUDA cores needs at least 2.72 G /
(132 SMs x 128 lanes x ~1.75 GHz) ~ 92 us, against ~14 us of dense TF32 tensor-core work (~400
TFLOP/s) and ~39 us to write the output, so eager's floor is ~39 us and no exact-fp32 CUDA-core
kernel can reach it. This version keeps the tensor cores and recovers the lost bits: each operand is
split as x = hi + lo, where hi keeps the top 11 significant bits (the low 13 mantissa bits cleared,
so hi is exact in TF32) and lo = x - hi; then x w ~ hi_x hi_w + hi_x lo_w + lo_x hi_w, dropping only
lo_x lo_w (~2^-22 relative). The three products run as ONE convolution with three times the input
channels -- input [hi_x, hi_x, lo_x] (per group) against weight [hi_w, lo_w, hi_w] -- so cuDNN
accumulates all of them in fp32 in a single pass; hi x hi products are exact and the error is at
fp32 level (~1e-6 relative). The cost is ~3x eager's tensor-core work (~41 us) plus the split and
concatenation passes over the 6 MB input; the conv is bound by tensor-core work, which this triples.
Measured on the H200: 0.93x vs eager (1.805 ms against 1.676 ms), closer than tripled work suggests:
eager took far longer than its ~39 us floor above, and why is unexplained. Eager's TF32 error is 18x
the strict tolerance, so this strict-fp32 solution races a faster, less exact path; it is the
fastest correct form we have.
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
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 padding: int = 0, output_padding: int = 0, groups: int = 1, bias: bool = False):
        super().__init__()
        self.conv_transpose3d = nn.ConvTranspose3d(
            in_channels, out_channels, kernel_size=(kernel_size, kernel_size, kernel_size),
            stride=stride, padding=padding, output_padding=output_padding, groups=groups, bias=bias)

    def forward(self, x):
        c = self.conv_transpose3d
        xh, xl = split_tf32(x)
        wh, wl = split_tf32(c.weight)
        x3 = cat3(xh, xh, xl, c.groups, 1)  # (N, 3 C_in, ...): per group [hi, hi, lo]
        w3 = cat3(wh, wl, wh, c.groups, 0)  # weight (C_in, C_out / groups, ...)
        return F.conv_transpose3d(x3, w3, c.bias, c.stride, c.padding, c.output_padding, c.groups,
                                  c.dilation)
