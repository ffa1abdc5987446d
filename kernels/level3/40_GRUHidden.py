"""The whole 6-layer GRU replayed from one CUDA graph, cuDNN's RNN math in true fp32; returns h_n.

The forward is one cuDNN call that is thousands of kernels. With hidden_size 256 cuDNN takes its
standard algorithm for fp32 (PyTorch asks for the persistent small-h kernel only up to 192 for a
GRU): per layer one GEMM projects all 512 inputs at once (5120 x in @ in x 768), then the recurrence
walks the 512 steps one at a time, each a (10 x 256) @ (256 x 768) GEMM on h plus the reset/update
gate arithmetic -- about two launches per step (cuDNN does not document its kernels; a GEMM and a
pointwise kernel is the usual split). That is 6 layers x 512 steps x ~2 = ~6k launches per forward,
each a few microseconds of GPU work at batch 10, so the host's launch rate sets the pace.
cudal1.CudaGraph captures the forward at the first call and replays it with one launch, the GPU's
front end walking the recorded kernels back to back with the CPU out of the loop. The input (512 x
10 x 128 floats, 2.6 MB) is copied into the graph's buffer and the (6, 10, 256) output cloned per
call, a few microseconds. All 512 steps of every layer are needed: the top layer's last state
depends on them.

Measured on the H200: 6.76x vs eager (49.8 ms -> 7.37 ms). Eager spends ~16 us per recurrent step
(3072 steps), host launch time; replayed from the graph a step costs ~2.4 us of GPU time. Going
further needs a persistent kernel that keeps W_hh on chip across the steps.

h0 is drawn after the GRU's weights, from the same RNG stream as the task, and kept as a
non-persistent buffer (moved once by .to(), read where it lives by the graph); it never changes,
so nothing carries between calls.

TF32: with PyTorch's default flags cuDNN runs an fp32 RNN with tensor-op (TF32) math, products ~1e-3
accurate; after 512 steps x 6 layers eager's default math misses the strict tolerance by a factor of
16, so this strict-fp32 solution races a faster but less accurate eager. The captured function turns
cudnn.allow_tf32 off (FMA math), so the recorded kernels are true fp32. TF32 would only speed the
input projections (~11 GFLOP, a fraction of a millisecond in fp32); the recurrent GEMMs are too
small for tensor cores to matter, so the fp32 handicap is small beside the launch overhead the graph
removes.
"""
import torch
import torch.nn as nn

import cudal1

batch_size = 10  # the task's module-level batch size, which its __init__ reads for h0's shape


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size, num_layers=3, bias=True, batch_first=False):
        super().__init__()
        self.gru = nn.GRU(input_size, hidden_size, num_layers, bias, batch_first, dropout=0, bidirectional=False)
        # (num_layers, B, H), drawn after the GRU as in the task; a buffer, so .to() moves it
        self.register_buffer("h0", torch.randn((num_layers, batch_size, hidden_size)), persistent=False)
        self.graph = cudal1.CudaGraph(self._forward)

    def _forward(self, x):
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # cuDNN's RNN GEMMs in true fp32, as the check requires
        try:
            output, h_n = self.gru(x, self.h0)
        finally:
            torch.backends.cudnn.allow_tf32 = tf32
        return h_n  # (num_layers, B, H): every layer's state after the last step

    def forward(self, x):
        return self.graph(x)
