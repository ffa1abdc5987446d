"""3xTF32 Conv2d from 3 channels: cuDNN's tensor-core path at fp32 accuracy, in one call.

Conv2d (16, 3, 256, 256) -> (16, 64, 254, 256), kernel (3, 5), padding (1, 2), dilation (2, 1): 3.00
G multiply-adds and a 266 MB output (~65 us to write at ~4.1 TB/s). PyTorch lets cuDNN use TF32 for
convolutions by default (~1e-3 relative error, which fails the strict fp32 tolerance), but measured,
eager's result matched the strict fp32 reference (eager's err/tol read 0), so cuDNN ran an fp32
algorithm for this shape. The main variant is a direct exact-fp32 kernel, whose FMA issue (~101 us
at the full fp32 rate) competes with the output writes. This variant keeps cuDNN's tensor-core path
and recovers the lost bits instead: each operand is split as x = hi + lo, where hi keeps the top 11
significant bits (the low 13 mantissa bits cleared, so hi is exact in TF32) and lo = x - hi; then x
w ~ hi_x hi_w + hi_x lo_w + lo_x hi_w, dropping only lo_x lo_w (~2^-22 relative). The three products
run as ONE convolution with 9 input channels -- input [hi_x, hi_x, lo_x] against weight [hi_w, lo_w,
hi_w] -- so cuDNN accumulates them in fp32 in a single pass, with hi x hi products exact and
fp32-level error (~1e-6 relative). The tensor-core work triples but stays small (~45 us dense), so
the call remains bound by the 266 MB of writes, plus the split and concatenation passes over the 13
MB input and a K three times larger in cuDNN's implicit GEMM. Measured on the H200: 0.42x vs eager
(0.772 ms against 0.326 ms), and the direct kernel measured 0.89x; why the split call is this much
slower than the estimate above is unexplained. Both are kept.
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
    def __init__(self, in_channels: int, out_channels: int, kernel_size: tuple, stride: int = 1,
                 padding: tuple = (0, 0), dilation: tuple = (1, 1), bias: bool = False):
        super().__init__()
        self.conv2d = nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride,
                                padding=padding, dilation=dilation, bias=bias)

    def forward(self, x):
        c = self.conv2d
        xh, xl = split_tf32(x)
        wh, wl = split_tf32(c.weight)
        x3 = cat3(xh, xh, xl, c.groups, 1)  # (N, 3 C_in, ...): per group [hi, hi, lo]
        w3 = torch.cat((wh, wl, wh), 1)  # weight (C_out, C_in / groups, ...)
        return F.conv2d(x3, w3, c.bias, c.stride, c.padding, c.dilation, c.groups)
