"""Fold the divisor into the conv's weights and bias, then LeakyReLU in place: two kernels, not three.

Eager runs the Conv2d (cuDNN, 3 -> 16 channels, 3x3, output (128, 16, 30, 30) = 7.4 MB),
`x / divisor` (a read and a write of that tensor) and LeakyReLU (another read and write). The
division is linear, so conv(x, W, b) / d = conv(x, W / d, b / d): the module keeps a copy of the
weight and bias divided by d, rebuilt only when the parameters change (keyed on their data_ptr and
_version), and the conv's output is already divided. LeakyReLU then runs in place on that fresh
output. One pass over 7.4 MB and one launch fewer; with d = 2 the fold is exact (a power of two),
and otherwise it adds one rounding per weight, far inside fp32 tolerance. The conv runs with
cuDNN's TF32 off, as the strict fp32 check needs (eager's default would use TF32), which costs
the conv some speed. Expect ~1.2-1.4x.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, divisor):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.divisor = divisor
        self._key = None  # (weight ptr, version, bias ptr, version, divisor) of the folded copy

    def _folded(self):
        w, b = self.conv.weight, self.conv.bias
        key = (w.data_ptr(), w._version, b.data_ptr(), b._version, self.divisor)
        if key != self._key:
            with torch.no_grad():
                self._w, self._b = w / self.divisor, b / self.divisor
            self._key = key
        return self._w, self._b

    def forward(self, x):
        w, b = self._folded()
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # true fp32, as the strict check needs
        try:
            y = self.conv._conv_forward(x, w, b)  # (B, C, 30, 30), already divided
        finally:
            torch.backends.cudnn.allow_tf32 = tf32
        return F.leaky_relu_(y, 0.01)
