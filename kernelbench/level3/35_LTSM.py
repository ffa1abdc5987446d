"""6-layer LSTM (batch-first), Linear on the last time step of the top layer:
(batch, seq, input_size) -> (batch, output_size).

Quirks kept on purpose: h0 and c0 are plain tensors drawn with randn at construction (h0, then
c0, before the LSTM's weights) with the module-level batch_size; model.to() does not move them,
forward does. Forward then sets self.c0 = h0, so the initial CELL state equals h0 and the drawn
c0 is never used. The values do not change between calls. dropout = 0 (no inter-layer dropout).
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, input_size, hidden_size, num_layers, output_size, dropout=0.0):
        super().__init__()
        self.h0 = torch.randn((num_layers, batch_size, hidden_size))
        self.c0 = torch.randn((num_layers, batch_size, hidden_size))  # drawn, then replaced in forward
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers, batch_first=True, dropout=dropout, bidirectional=False)
        self.fc = nn.Linear(hidden_size, output_size)

    def forward(self, x):
        self.h0 = self.h0.to(x.device)
        self.c0 = self.h0.to(x.device)  # the cell state starts from h0 (quirk)
        out, state = self.lstm(x, (self.h0, self.c0))  # out: (B, seq, hidden_size)
        out = self.fc(out[:, -1, :])  # (B, output_size)
        return out


batch_size = 10
sequence_length = 512
input_size = 128
hidden_size = 256
num_layers = 6
output_size = 10
dropout = 0.0


def get_inputs():
    return [torch.randn(batch_size, sequence_length, input_size)]


def get_init_inputs():
    return [input_size, hidden_size, num_layers, output_size, dropout]
