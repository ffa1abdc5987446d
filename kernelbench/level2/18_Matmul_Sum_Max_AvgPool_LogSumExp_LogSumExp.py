"""Linear layer, row sum, then max, mean and two logsumexps over dim 1: (batch, 10) -> (batch, 1).

After the keepdim sum dim 1 has size 1, so every later reduction is an identity: the output is
the row sum of linear(x) (not constant).
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        x = self.linear(x)
        x = torch.sum(x, dim=1, keepdim=True)  # (B, 1); the rest are identities
        x = torch.max(x, dim=1, keepdim=True).values
        x = torch.mean(x, dim=1, keepdim=True)
        x = torch.logsumexp(x, dim=1, keepdim=True)
        x = torch.logsumexp(x, dim=1, keepdim=True)
        return x


batch_size = 128
in_features = 10
out_features = 5


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
