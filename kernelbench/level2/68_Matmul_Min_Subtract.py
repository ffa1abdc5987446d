"""Linear layer, elementwise min with a learned scalar c, subtract c: (batch, 10) -> (batch, 5).

Output is min(x, c) - c <= 0; with c = 2 almost all values are just linear(x) - 2.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features, constant):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.constant = nn.Parameter(torch.tensor(constant))  # 0-dim

    def forward(self, x):
        x = self.linear(x)
        x = torch.min(x, self.constant)  # elementwise
        x = x - self.constant
        return x


batch_size = 128
in_features = 10
out_features = 5
constant = 2.0


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, constant]
