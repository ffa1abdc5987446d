"""Exact-fp32 ConvTranspose2d as an autotuned forward convolution: no TF32, no split.

At stride 1 a transposed convolution is the forward convolution of the same input with the window
flipped, the weight's channel axes swapped (per group) and padding dilation*(k-1)-padding. Eager
runs cuDNN's transposed path with TF32, whose error fails the strict tolerance. This version skips
the 3xTF32 split (three extra passes over the input and three times the convolution work) and asks
cuDNN for an exact fp32 forward convolution (TF32 off for this call only), with the autotuner on so
that it can find fp32 algorithms that beat a plain FMA loop (for 2D 3x3-type windows, Winograd and
FFT variants do far fewer multiplications). The first call of each shape times the candidates; later
calls reuse the fastest. The flags are restored after the call.
Measured on the H200: 0.70x vs eager (0.106 ms against 0.074 ms); the plain TF32-off transposed call
read 0.64x. The autotuner did not help the other transposed convolutions.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def forward_weight(w, groups):
    """Transposed-conv weight (C_in, C_out/g, *k) -> the forward-conv weight (C_out, C_in/g, *k)."""
    cin, cout_g, *k = w.shape
    w = w.reshape(groups, cin // groups, cout_g, *k).transpose(1, 2).reshape(groups * cout_g, cin // groups, *k)
    return w.flip(list(range(2, w.dim())))  # the window, mirrored


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
    def __init__(self, in_channels: int, out_channels: int, kernel_size: tuple,
                 stride: tuple = (1, 1), padding: tuple = (0, 0), output_padding: tuple = (0, 0),
                 dilation: tuple = (1, 1), groups: int = 1, bias: bool = False):
        super().__init__()
        self.conv_transpose2d = nn.ConvTranspose2d(in_channels, out_channels, kernel_size,
                                                   stride=stride, padding=padding,
                                                   output_padding=output_padding, dilation=dilation,
                                                   groups=groups, bias=bias)
        self.wf, self.wf_key = None, None  # the forward weight and what it was made from

    def forward(self, x):
        c = self.conv_transpose2d
        pad = [d * (k - 1) - p for d, k, p in zip(c.dilation, c.kernel_size, c.padding)]
        if any(s != 1 for s in c.stride) or min(pad) < 0:  # not a plain convolution
            return autotuned(F.conv_transpose2d, x, c.weight, c.bias, c.stride, c.padding, c.output_padding,
                             c.groups, c.dilation, tf32=False)
        key = (c.weight._version, c.weight.data_ptr())
        if torch.is_grad_enabled():
            return autotuned(F.conv2d, x, forward_weight(c.weight, c.groups), c.bias, 1, pad, c.dilation,
                             c.groups, tf32=False)
        if key != self.wf_key:
            self.wf, self.wf_key = forward_weight(c.weight, c.groups), key
        return autotuned(F.conv2d, x, self.wf, c.bias, 1, pad, c.dilation, c.groups, tf32=False)
