"""The output is a constant: skip the conv, the GroupNorm and the elementwise chain.

torch.min(x, min_value) makes every element <= min_value, and the clamp that follows has lower
bound min_value, so every element becomes exactly min_value (for any finite input; in general
clamp(., lo, hi) of it is min(lo, hi), which this uses). With min_value = 0.0 the tensor is all
zeros, and dropout -- live, since KernelBench never calls .eval() -- zeroes some elements and
rescales the rest by 1/(1-p), which leaves zeros as zeros. So the result is a zero tensor of the
conv's output shape (128, 16, 14, 30, 30), computed here from the input shape and the conv's
kernel size, stride, padding and dilation. One torch.zeros call writes it (103 MB, ~30 us at
memory speed) instead of a conv3d, a two-pass GroupNorm, min, clamp and dropout, which each read
and write the 103 MB activation (~1.5 GB of traffic in all): expect ~10-20x. If the constant is
not zero, dropout still has to run on it (its output is random), and it does. Caveat: a NaN or
inf in the input would give NaN in the reference and 0 here. The conv and norm are kept so the
parameters and state_dict match the reference.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, groups, min_value, max_value, dropout_p):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.norm = nn.GroupNorm(groups, out_channels)
        self.dropout = nn.Dropout(dropout_p)
        self.min_value = min_value
        self.max_value = max_value

    def forward(self, x):
        c = self.conv
        size = [x.shape[0], c.out_channels]
        for i in range(3):  # Conv3d output size per spatial dim
            size.append((x.shape[2 + i] + 2 * c.padding[i] - c.dilation[i] * (c.kernel_size[i] - 1) - 1)
                        // c.stride[i] + 1)
        value = min(self.min_value, self.max_value)  # clamp(min(x, lo), lo, hi) == min(lo, hi)
        if value == 0.0:
            return torch.zeros(size, device=x.device, dtype=x.dtype)  # dropout(0) == 0
        return self.dropout(torch.full(size, value, device=x.device, dtype=x.dtype))
