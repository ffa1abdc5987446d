"""Fold both subtractions into the conv bias; Mish runs in place on the conv output.

Eager runs four kernels: the convolution (cuDNN, bias fused), `x - 0.5`, `x - 0.2` and Mish, and
the three elementwise ones each read and write the (128, 16, 30, 30) conv output (7.4 MB). Since
(W*x + b) - v1 - v2 = W*x + ((b - v1) - v2), the constants can live in the bias: the module keeps
a shifted copy of the conv bias (16 floats, rebuilt only when the parameter's storage or version
counter changes, so load_state_dict or an optimiser step invalidates it) and calls the conv with
it, then F.mish(inplace=True) on that fresh output. Two kernels instead of four and one pass
over the result instead of three (~15 MB of traffic instead of ~45). Folding changes only the
rounding of one add per element (relative 2^-24), far inside the fp32 tolerance. The convolution
runs with TF32 off (strict fp32), so the head can be a little slower than eager's. Expect
~1.3-1.8x.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, subtract_value_1, subtract_value_2):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.subtract_value_1 = subtract_value_1
        self.subtract_value_2 = subtract_value_2
        self._key = None  # (bias ptr, version, v1, v2) of the shifted copy

    def _bias(self):
        b = self.conv.bias
        key = (b.data_ptr(), b._version, self.subtract_value_1, self.subtract_value_2)
        if key != self._key:
            with torch.no_grad():
                self._b = (b - self.subtract_value_1) - self.subtract_value_2
            self._key = key
        return self._b

    def forward(self, x):
        c = self.conv
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # strict fp32: eager lets cuDNN use TF32
        x = c._conv_forward(x, c.weight, self._bias())  # (B, C, 30, 30), already shifted
        torch.backends.cudnn.allow_tf32 = tf32
        return F.mish(x, inplace=True)
