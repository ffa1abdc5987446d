"""Linear layer, sigmoid, row sum, logsumexp over the batch: (batch, 10) -> a 0-dim scalar.

Quirk of the original, kept on purpose: linear2 is created after linear1 (it draws from the RNG
and sits in the parameter list) but is never used.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super().__init__()
        self.linear1 = nn.Linear(input_size, hidden_size)
        self.linear2 = nn.Linear(hidden_size, output_size)  # unused in forward

    def forward(self, x):
        x = self.linear1(x)
        x = torch.sigmoid(x)
        x = torch.sum(x, dim=1)  # (B,)
        x = torch.logsumexp(x, dim=0)  # ()
        return x


batch_size = 128
input_size = 10
hidden_size = 20
output_size = 5


def get_inputs():
    return [torch.randn(batch_size, input_size)]


def get_init_inputs():
    return [input_size, hidden_size, output_size]
