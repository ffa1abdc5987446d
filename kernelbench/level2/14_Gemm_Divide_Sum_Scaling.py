"""Matmul with a plain randn weight (no bias), halve, row sum, scale: (batch, 10) -> (batch, 1)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, input_size, hidden_size, scaling_factor):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(hidden_size, input_size))  # randn, not Linear's init
        self.scaling_factor = scaling_factor

    def forward(self, x):
        x = torch.matmul(x, self.weight.T)  # (B, hidden_size)
        x = x / 2
        x = torch.sum(x, dim=1, keepdim=True)  # (B, 1)
        x = x * self.scaling_factor
        return x


batch_size = 128
input_size = 10
hidden_size = 20
scaling_factor = 1.5


def get_inputs():
    return [torch.randn(batch_size, input_size)]


def get_init_inputs():
    return [input_size, hidden_size, scaling_factor]
