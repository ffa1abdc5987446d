"""The whole 6-layer bidirectional LSTM replayed from one CUDA graph, cuDNN's RNN math in true fp32.

The forward is one cuDNN call, but that call is thousands of kernels. With hidden_size 256 cuDNN
takes its standard algorithm for fp32 (PyTorch asks for the persistent small-h kernel only up to 192
for an LSTM): per layer and direction one GEMM projects all 512 inputs at once (5120 x 512 @ 512 x
1024), then the recurrence walks the 512 steps one at a time, each a (10 x 256) @ (256 x 1024) GEMM
on h plus the gate nonlinearities -- about two launches per step (cuDNN does not document its
kernels; a GEMM and a pointwise kernel is the usual split). That is 6 layers x 2 directions x 512
steps x ~2 = ~12k launches per forward, every one a few microseconds of GPU work at batch 10, so the
host's launch rate sets the pace. cudal1.CudaGraph captures the whole forward (LSTM and the final
Linear on out[:, -1]) at the first call and then replays it with one launch: the GPU's front end
walks the recorded kernels back to back with the CPU out of the loop. The input (10 x 512 x 128
floats, 2.6 MB) is copied into the graph's buffer and the (10, 10) output cloned each call, both
negligible.

Measured on the H200: 2.82x vs eager (65.2 ms -> 23.2 ms). Eager spends ~10.6 us per step of one
direction (6144 of them), host launch time; the graph replays one in ~3.8 us of GPU time, more than
the ~2.8 us of the unidirectional LSTM (task 35, 8.61 ms), so the gain is smaller than there.

Quirks kept: h0 is drawn before c0, and both before the LSTM's weights, from the same RNG stream as
the task (c0 is drawn only to keep that stream aligned: the task's forward replaces it with h0, so
the initial cell state is h0 too). h0 is a non-persistent buffer here, so .to() moves it once and
the graph reads it where it lives; it never changes, so nothing carries between calls.

TF32: with PyTorch's default flags cuDNN runs an fp32 RNN with tensor-op (TF32) math, products ~1e-3
accurate; after 512 steps x 6 layers eager's default math misses the strict tolerance, narrowly (by
a factor of 1.05), so this strict-fp32 solution races a faster but slightly too inaccurate eager.
The captured function turns cudnn.allow_tf32 off (FMA math), so the kernels recorded in the graph
are true fp32. What TF32 buys eager is confined to the input projections (~56 GFLOP, ~1 ms in fp32
on the H200); the recurrent GEMMs are far too small for tensor cores to matter.

Not done: only the top layer's backward output at t = last reaches the Linear, which is that
direction's first step from h0, so 511 of its 512 steps are wasted work (1/12 of the recurrence);
cutting them means running layer 6 apart from cuDNN's fused 6-layer call. The saving is likely near
that 1/12: 23.2 ms is well over twice the unidirectional 8.61 ms, which suggests cuDNN does not
overlap a layer's two directions much.
"""
import torch
import torch.nn as nn

import cudal1

batch_size = 10  # the task's module-level batch size, which its __init__ reads for h0's shape


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size, num_layers, output_size, dropout=0.0):
        super().__init__()
        # (2 * num_layers, B, H), drawn first as in the task; a buffer, so .to() moves it
        self.register_buffer("h0", torch.randn((num_layers * 2, batch_size, hidden_size)), persistent=False)
        torch.randn((num_layers * 2, batch_size, hidden_size))  # the task's c0: drawn, never used
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers, batch_first=True, dropout=dropout, bidirectional=True)
        self.fc = nn.Linear(hidden_size * 2, output_size)
        self.graph = cudal1.CudaGraph(self._forward)

    def _forward(self, x):
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # cuDNN's RNN GEMMs in true fp32, as the check requires
        try:
            out, _ = self.lstm(x, (self.h0, self.h0))  # the cell state starts from h0 too (the task's quirk)
        finally:
            torch.backends.cudnn.allow_tf32 = tf32
        return self.fc(out[:, -1, :])  # (B, 2H) -> (B, output_size)

    def forward(self, x):
        return self.graph(x)
