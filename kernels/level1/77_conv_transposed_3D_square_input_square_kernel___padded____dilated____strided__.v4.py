"""3xTF32 ConvTranspose3d (v1) with cuDNN's autotuner on for the call.

v1 splits each operand as hi + lo (hi exact in TF32) and sums hi hi + hi lo + lo hi in one
transposed convolution over three times the input channels: fp32 accuracy on the tensor cores.
At stride 2 the transposed convolution is not a plain forward one, so v3's trick does not apply;
this version only turns on torch.backends.cudnn.benchmark for its own call (restored after), so
the first call of each shape times cuDNN's algorithms and later calls reuse the fastest.
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


def autotuned(conv, *args, tf32=True):
    """conv(*args) with cuDNN's autotuner on for this call only (the flags are restored after):
    the first call of each shape times cuDNN's algorithms and later calls reuse the fastest, where
    PyTorch's default picks one by heuristics. tf32=False forbids TF32 algorithms as well."""
    b = torch.backends.cudnn
    saved = b.benchmark, b.allow_tf32
    b.benchmark, b.allow_tf32 = True, tf32 and saved[1]
    try:
        return conv(*args)
    finally:
        b.benchmark, b.allow_tf32 = saved


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 padding: int = 0, dilation: int = 1, bias: bool = False):
        super().__init__()
        self.conv_transpose3d = nn.ConvTranspose3d(
            in_channels, out_channels, kernel_size=(kernel_size, kernel_size, kernel_size),
            stride=stride, padding=padding, dilation=dilation, bias=bias)

    def forward(self, x):
        c = self.conv_transpose3d
        xh, xl = split_tf32(x)
        wh, wl = split_tf32(c.weight)
        x3 = cat3(xh, xh, xl, c.groups, 1)  # (N, 3 C_in, ...): per group [hi, hi, lo]
        w3 = cat3(wh, wl, wh, c.groups, 0)  # weight (C_in, C_out / groups, ...)
        return autotuned(F.conv_transpose3d, x3, w3, c.bias, c.stride, c.padding, c.output_padding,
                         c.groups, c.dilation)
