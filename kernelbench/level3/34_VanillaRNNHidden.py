"""One step of an Elman RNN cell, returning the new hidden state: hidden = tanh(i2h([x, hidden])):
(batch, input_size) -> (batch, hidden_size). h2o exists (and draws weights) but its output is discarded.

Quirks kept on purpose: the module is STATEFUL, each forward overwrites self.hidden, so repeated
calls give different results and a reference and a solution must see the same call history.
self.hidden is a plain tensor (not a parameter or buffer) drawn with randn at construction,
before the Linear layers, with the module-level batch_size; model.to() does not move it, forward
does. sequence_length is defined but unused.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.output_size = output_size
        self.hidden = torch.randn((batch_size, hidden_size))  # first draw from the RNG
        self.i2h = nn.Linear(input_size + hidden_size, hidden_size)
        self.h2o = nn.Linear(hidden_size, output_size)
        self.tanh = nn.Tanh()

    def forward(self, x):
        self.hidden = self.hidden.to(x.device)
        combined = torch.cat((x, self.hidden), dim=1)  # (B, input_size + hidden_size)
        self.hidden = self.tanh(self.i2h(combined))  # state carried to the next call
        output = self.h2o(self.hidden)  # computed and discarded
        return self.hidden


batch_size = 8
input_size = 1024
hidden_size = 256
output_size = 128
sequence_length = 256


def get_inputs():
    return [torch.randn(batch_size, input_size)]


def get_init_inputs():
    return [input_size, hidden_size, output_size]
