"""Linear layer, subtract, row mean, logsumexp, GELU, then add the INPUT back: (batch, 1024) -> (batch, 1024).

Each input row gets one per-row scalar added: gelu(mean(gemm(x) - subtract)). The logsumexp over a
size-1 dim is an identity.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=bias)
        self.subtract = nn.Parameter(torch.randn(out_features))

    def forward(self, x):
        original_x = x.clone().detach()  # (B, in_features)
        x = self.gemm(x)
        x = x - self.subtract
        x = torch.mean(x, dim=1, keepdim=True)  # (B, 1)
        x = torch.logsumexp(x, dim=1, keepdim=True)  # identity on a size-1 dim
        x = F.gelu(x)
        x = x + original_x  # (B, 1) + (B, in_features)
        return x


batch_size = 128
in_features = 1024
out_features = 512


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
