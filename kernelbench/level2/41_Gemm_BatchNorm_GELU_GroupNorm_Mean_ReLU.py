"""Linear layer, BatchNorm1d, GELU, GroupNorm, row mean, ReLU: (batch, 512) -> (batch, 1).

Quirks of the original, kept on purpose: GroupNorm (weight 1, bias 0 at init) makes each
equal-size group zero-mean, so the row mean is mathematically 0 and the output is 0 or rounding
noise (~1e-8). BatchNorm is in training mode (the benchmark never calls eval()): it uses the
batch's own statistics and updates its running buffers as a side effect.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features, out_features, num_groups):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.batch_norm = nn.BatchNorm1d(out_features)
        self.group_norm = nn.GroupNorm(num_groups, out_features)

    def forward(self, x):
        x = self.gemm(x)
        x = self.batch_norm(x)
        x = F.gelu(x)
        x = self.group_norm(x)
        x = torch.mean(x, dim=1, keepdim=True)  # (B, 1); ~0, see the docstring
        x = torch.relu(x)
        return x


batch_size = 128
in_features = 512
out_features = 1024
num_groups = 8


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, num_groups]
