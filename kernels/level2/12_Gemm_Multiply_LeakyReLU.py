"""Fold the multiplier into the Linear weights: one GEMM (bias fused) + an in-place LeakyReLU.

Eager runs three kernels: the Linear (cuBLAS with the bias fused into its epilogue), `x *
multiplier` (a full read and write of the (128, 512) result), and LeakyReLU (another). Since
multiplier * (x W^T + b) = x (multiplier W)^T + (multiplier b), the scaling can live in the
weights: the module keeps a scaled copy of W and b and calls F.linear on it, so the GEMM's output
is already scaled, and LeakyReLU runs in place on that fresh output. Two kernels and two
dispatches instead of three, and one less pass over the result. The copy is rebuilt whenever
the parameters change (keyed on their storage and version counters, so load_state_dict or an
optimiser step invalidates it), which costs one small elementwise op once, not per call. With
multiplier = 2.0 the scaling is exact (a power of two); for other values it adds one rounding
per weight (relative 2^-24), far inside fp32 tolerance. Expect ~1.2-1.4x: the work is tiny
(128 x 512 x 1024) and the saving is one launch and one dispatch. Gradients do not flow through
the cached copy (the benchmark is inference only).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier = multiplier
        self.leaky_relu = nn.LeakyReLU(negative_slope)
        self._key = None  # (weight ptr, version, bias ptr, version, multiplier) of the scaled copy

    def _scaled(self):
        w, b = self.gemm.weight, self.gemm.bias
        key = (w.data_ptr(), w._version, b.data_ptr(), b._version, self.multiplier)
        if key != self._key:
            with torch.no_grad():
                self._w, self._b = w * self.multiplier, b * self.multiplier
            self._key = key
        return self._w, self._b

    def forward(self, x):
        w, b = self._scaled()
        y = F.linear(x, w, b)  # (B, out_features), already multiplied
        return F.leaky_relu(y, self.leaky_relu.negative_slope, inplace=True)
