"""The output is identically zero: skip the GEMM, the max, the mean and the GELU.

After `max(dim=1, keepdim=True)` the tensor is (batch, 1), so `mean(dim=1, keepdim=True)` averages
a single element and returns it unchanged; `x - x.mean(...)` is then exactly 0.0 for every finite
x (IEEE subtraction of a number from itself), and GELU(0) = 0 * Phi(0) = 0. Whatever the input or
the weights, the result is a (batch, 1) tensor of zeros, so forward allocates it with one
torch.zeros call: a single tiny fill kernel instead of a 128 x 512 x 1024 GEMM plus four more
kernels (max, mean, subtract, GELU) and their dispatch -- expect ~3-6x, bound by launch overhead
on both sides. Caveat, stated honestly: if the GEMM produced inf or NaN (inputs with inf/NaN, or
overflow), the reference would give NaN where this gives 0. The Linear layer is kept so that the
parameters, and hence the state_dict, match the reference. For max_dim other than the last
feature dim the identity does not hold, and the full computation runs.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, max_dim):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.max_dim = max_dim

    def forward(self, x):
        if x.dim() == 2 and self.max_dim in (1, -1):
            return torch.zeros(x.shape[0], 1, device=x.device, dtype=x.dtype)  # (B, 1)
        x = self.gemm(x)
        x = torch.max(x, dim=self.max_dim, keepdim=True).values
        x = x - x.mean(dim=1, keepdim=True)
        return F.gelu(x)
