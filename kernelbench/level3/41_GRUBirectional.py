"""6-layer bidirectional GRU (sequence-first), returning the top layer's output at every step:
(seq, batch, input_size) -> (seq, batch, 2 * hidden_size). Forward and backward features are
concatenated on the last dim.

h0 is a plain tensor drawn with randn at construction AFTER the GRU's weights, with the
module-level batch_size; model.to() does not move it, forward does. It is not changed by forward.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, input_size, hidden_size, num_layers=3, bias=True, batch_first=False):
        super().__init__()
        self.gru = nn.GRU(input_size, hidden_size, num_layers, bias, batch_first, dropout=0, bidirectional=True)
        self.h0 = torch.randn((num_layers * 2, batch_size, hidden_size))

    def forward(self, x):
        self.h0 = self.h0.to(x.device)
        output, h_n = self.gru(x, self.h0)
        return output


batch_size = 10
seq_len = 512
input_size = 128
hidden_size = 256
num_layers = 6


def get_inputs():
    return [torch.randn(seq_len, batch_size, input_size)]


def get_init_inputs():
    return [input_size, hidden_size, num_layers]
