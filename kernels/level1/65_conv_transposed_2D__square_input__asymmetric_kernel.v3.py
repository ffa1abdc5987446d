"""3xTF32 ConvTranspose2d run as the forward convolution it equals at stride 1.

At stride 1 a transposed convolution is an ordinary convolution of the same input with the window
flipped, the two channel axes of the weight swapped (per group), and padding dilation*(k-1)-padding.
Eager calls cuDNN's transposed path, which on this task runs far below the tensor cores' rate; the
plain 3xTF32 version keeps that path and triples its work to reach fp32 accuracy (0.39x). This
version keeps its accuracy recipe -- each operand split as x = hi + lo with hi exact in TF32, and
the three products hi_x hi_w + hi_x lo_w + lo_x hi_w summed in fp32 by ONE convolution over three
times the input channels ([hi_x, hi_x, lo_x] against [hi_w, lo_w, hi_w], per group) -- but hands it
to cuDNN's forward convolution, its most tuned path, betting that the tripled work there costs less
than eager's single pass through the transposed one. The bet pays in 3D (the three 3D tasks rose
from 0.32-0.83x to 0.92-2.02x) but hardly in 2D (the five 2D tasks stay at 0.40-0.55x), where
eager's transposed kernels are quicker. The flipped, split weight is made once and reused while the
weight is unchanged (its in-place version counter and address are the key; never under autograd).
Strides other than 1 fall back to the transposed call.
Measured on the H200: 0.47x vs eager (0.500 ms against 0.234 ms); the transposed-path 3xTF32 version
read 0.42x in the same run.
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


def forward_weight(w, groups):
    """Transposed-conv weight (C_in, C_out/g, *k) -> the forward-conv weight (C_out, C_in/g, *k)."""
    cin, cout_g, *k = w.shape
    w = w.reshape(groups, cin // groups, cout_g, *k).transpose(1, 2).reshape(groups * cout_g, cin // groups, *k)
    return w.flip(list(range(2, w.dim())))  # the window, mirrored


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: tuple, stride: int = 1,
                 padding: int = 0, output_padding: int = 0, groups: int = 1, bias: bool = False):
        super().__init__()
        self.conv_transpose2d = nn.ConvTranspose2d(in_channels, out_channels, kernel_size,
                                                   stride=stride, padding=padding,
                                                   output_padding=output_padding, groups=groups,
                                                   bias=bias)
        self.w3, self.w3_key = None, None  # the forward weight, split, and what it was made from

    def forward(self, x):
        c = self.conv_transpose2d
        pad = [d * (k - 1) - p for d, k, p in zip(c.dilation, c.kernel_size, c.padding)]
        xh, xl = split_tf32(x)
        x3 = cat3(xh, xh, xl, c.groups, 1)  # (N, 3 C_in, ...): per group [hi, hi, lo]
        if any(s != 1 for s in c.stride) or min(pad) < 0:  # not a plain convolution: v1's call
            wh, wl = split_tf32(c.weight)
            return F.conv_transpose2d(x3, cat3(wh, wl, wh, c.groups, 0), c.bias, c.stride, c.padding,
                                      c.output_padding, c.groups, c.dilation)
        key = (c.weight._version, c.weight.data_ptr())
        if torch.is_grad_enabled() or key != self.w3_key:
            wh, wl = split_tf32(forward_weight(c.weight, c.groups))
            w3 = torch.cat((wh, wl, wh), 1)  # (C_out, 3 C_in / groups, *k): [hi, lo, hi] per group
            if torch.is_grad_enabled():
                return F.conv2d(x3, w3, c.bias, 1, pad, c.dilation, c.groups)
            self.w3, self.w3_key = w3, key
        return F.conv2d(x3, self.w3, c.bias, 1, pad, c.dilation, c.groups)
