"""Linear layer, dropout (training mode), row mean, softmax over dim 1: (batch, 100) -> (batch, 1).

Quirk of the original, kept on purpose: softmax over a size-1 dim is exactly 1.0, so the output
is all ones whatever the input, weights and dropout mask. Dropout stays live and stochastic (the
benchmark never calls eval()) but cannot change the result.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features, dropout_p):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.dropout = nn.Dropout(dropout_p)

    def forward(self, x):
        x = self.matmul(x)
        x = self.dropout(x)
        x = torch.mean(x, dim=1, keepdim=True)  # (B, 1)
        x = torch.softmax(x, dim=1)  # exactly 1.0
        return x


batch_size = 128
in_features = 100
out_features = 50
dropout_p = 0.2


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, dropout_p]
