"""6-layer LSTM returning the final cell state c_n of every layer: cuDNN in true fp32, replayed
from one CUDA graph.

The work: 6 layers x 512 time steps at batch 10, hidden 256: ~31 GFLOP, but as 3072 dependent
steps. cuDNN runs each layer's input projection for all time steps as one GEMM, then 512 recurrent
steps, each a (10 x 256) @ (256 x 1024) GEMM against W_hh (1 MB) plus the gate pointwise work:
microseconds of latency-bound work per step that no amount of math throughput shortens.

cudal1.CudaGraph captures the whole call (the six layers' kernels; the reference's fc on the last
step is computed and discarded, so it is skipped here) and replays it as one graph launch, removing
the host gaps between cuDNN's per-step launches; the input (2.6 MB) and h0 are copied into the
graph's buffers, the output is cloned. Measured on the H200: 3.86x vs eager (33.0 ms -> 8.56 ms).
Eager spends ~11 us per recurrent step, the host launching cuDNN's per-step kernels; replayed from
the graph a step costs ~2.8 us of GPU time. Going much further needs a persistent kernel (W_hh held
on chip across the 512 steps, one grid-wide barrier per step, layers run as a wavefront).

TF32: PyTorch passes cudnn.allow_tf32 to cuDNN's RNN descriptor too, so eager's LSTM runs its GEMMs
in TF32 (~1e-3 relative error per product, compounding through 512 steps): eager's default math
misses the strict tolerance here by a factor of 27, so this strict-fp32 solution races a faster but
less accurate eager. Here cudnn.allow_tf32 is off inside the forward, so cuDNN uses FMA math; at
M = 10 rows per recurrent GEMM tensor cores buy little, so exact fp32 costs little, and the input
GEMMs (5120 x 128 or 256 x 1024 per layer) are small.

Quirks kept: h0 and c0 are plain tensors drawn with randn before the LSTM, with the module-level
batch_size; forward moves h0 to the device and sets c0 = h0, so the initial cell state is h0 and
the drawn c0 is never used. No state changes between calls, dropout is 0.
"""
import torch
import torch.nn as nn

import cudal1

batch_size = 10  # the task's module-level batch size: h0's batch dimension is fixed to it


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size, num_layers, output_size, dropout=0.0):
        super().__init__()
        self.h0 = torch.randn((num_layers, batch_size, hidden_size))
        self.c0 = torch.randn((num_layers, batch_size, hidden_size))  # drawn, then replaced in forward
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers, batch_first=True, dropout=dropout, bidirectional=False)
        self.fc = nn.Linear(hidden_size, output_size)
        self.run = cudal1.CudaGraph(self.graphed)

    def graphed(self, x, h0):
        cudnn = torch.backends.cudnn
        tf32 = cudnn.allow_tf32
        cudnn.allow_tf32 = False  # cuDNN's RNN in FMA math: true fp32, as the check requires
        try:
            out, state = self.lstm(x, (h0, h0))  # the cell state starts from h0 (quirk); out (B, seq, hidden)
            return state[1]  # (num_layers, B, hidden): the final cell state c_n; fc(out[:, -1]) would be discarded
        finally:
            cudnn.allow_tf32 = tf32

    def forward(self, x):
        self.h0 = self.h0.to(x.device)
        self.c0 = self.h0  # as the reference leaves it
        return self.run(x, self.h0)
