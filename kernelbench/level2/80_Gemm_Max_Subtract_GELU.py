"""Linear layer, max over features (keepdim), subtract the mean, GELU: (batch, in_features) -> (batch, 1).

Quirk of the original, kept on purpose: after the keepdim max the tensor is (batch, 1), so its
mean over dim 1 is itself, x - mean is exactly 0 and the output is all zeros for any input and
weights (the original docstring's (batch, out_features) shape is wrong).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features, out_features, max_dim):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.max_dim = max_dim

    def forward(self, x):
        x = self.gemm(x)  # (B, out_features)
        x = torch.max(x, dim=self.max_dim, keepdim=True).values  # (B, 1)
        x = x - x.mean(dim=1, keepdim=True)  # identically 0: mean of one element
        x = F.gelu(x)
        return x


batch_size = 128
in_features = 512
out_features = 1024
max_dim = 1


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, max_dim]
