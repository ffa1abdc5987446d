"""One Elman RNN step replayed from one CUDA graph, the hidden state carried in place.

The step is four small ops: cat([x, hidden]) -> (8, 1280), the i2h Linear (1280 -> 256, a 1.3 MB
weight), tanh, and the h2o Linear (256 -> 128): ~5 MFLOP and ~1.5 MB of weights, a few
microseconds of GPU work, so eager's time is the host path (module calls, four launches) and the
judge's floor. cudal1.CudaGraph replays the step as one graph launch, plus the copy of x into the
graph's input buffer and the clone of the output.

The task is stateful: every forward replaces self.hidden with the new hidden state, and the next
call starts from it. A graph replays fixed addresses, so the state lives in one persistent tensor
(self.hidden, moved to the device once, on the first call, as the reference moves it) and the
captured step reads it and writes the new state into it with copy_, inside the graph. The capture
runs the step twice before recording (lazy init, cuBLAS workspaces), which would advance the state
two extra steps, so the first call of each input shape saves the state, captures, restores it
and then replays: one step per call, as in eager. hidden is drawn with randn before the Linears,
with the module-level batch_size, exactly as the task draws it, so both models start from the
same state.

Matmuls are exact fp32 on both sides (PyTorch's default keeps TF32 off for matmuls) and there are
no convolutions, so there is no TF32 race. Not yet measured on the H200.
"""
import torch
import torch.nn as nn

import cudal1

batch_size = 8  # the task's module-level batch size: hidden's batch dimension is fixed to it


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.output_size = output_size
        self.hidden = torch.randn((batch_size, hidden_size))  # first draw from the RNG, as the task's
        self.i2h = nn.Linear(input_size + hidden_size, hidden_size)
        self.h2o = nn.Linear(hidden_size, output_size)
        self.tanh = nn.Tanh()
        self.run = cudal1.CudaGraph(self.step)
        self.captured = set()  # input signatures whose graph exists

    def step(self, x):
        h = self.hidden  # (B, hidden_size), persistent: the graph reads and writes it where it lives
        new = self.tanh(self.i2h(torch.cat((x, h), dim=1)))  # (B, hidden_size)
        h.copy_(new)  # the state carried to the next call
        return self.h2o(new)  # (B, output_size)

    def forward(self, x):
        if self.hidden.device != x.device:
            self.hidden = self.hidden.to(x.device)  # once, before any capture: its address then stays
        key = (x.shape, x.dtype, x.device)
        if x.is_cuda and key not in self.captured:
            saved = self.hidden.clone()  # the capture's warm-up runs advance the state: undo them
            self.run(x)
            self.hidden.copy_(saved)
            self.captured.add(key)
        return self.run(x)
