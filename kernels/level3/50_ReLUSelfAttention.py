"""ReLU "attention": scale, causal mask and ReLU of the scores in one in-place pass that reads only
the lower triangle.

At B = 16, T = 1024, C = 768, 12 heads of 64 the scores att are (16, 12, 1024, 1024) = 805 MB. Eager
writes them in q @ k^T, then reads and writes them three more times: the 1/sqrt(hs) scale,
masked_fill(-inf) above the diagonal, and ReLU (which turns the -inf into 0), before att @ v reads
them once more: ~6.4 GB of traffic, ~1.3 ms at the H200's 4.8 TB/s, beside ~110 GFLOP of fp32 GEMMs
(c_attn 16384 x 768 @ 768 x 2304, then the two batched products, 25.8 GFLOP each), which cuBLAS runs
in plain fp32 (matmul TF32 is off by default) for eager and for this alike, so there is no TF32 race
and eager meets the strict tolerance.

Here the three elementwise passes are one kernel, in place on q @ k^T's output: one block per score
row (query i of one (batch, head)), its threads striding over the T columns. Above the diagonal
(j > i) it writes 0 without reading -- what masked_fill(-inf) then ReLU leaves there -- and on or
below it writes relu(s * scale), with the multiply done exactly as eager's fp32 scalar multiply and
NaN kept as torch.relu keeps it. So the pass reads half the matrix and writes all of it: ~1.2 GB
instead of ~4.8 GB for the three eager kernels. The mask buffer is kept (same state_dict) but not
read: it is tril(ones), the same j <= i test, for any T <= max_seqlen.

Measured on the H200: 1.42x vs eager (4.59 ms -> 3.25 ms). The 1.34 ms saved is more than the
~0.75 ms the traffic count predicts, most likely because eager's three passes run below peak
bandwidth (masked_fill also builds and reads a boolean mask); the GEMMs stay the floor.

Not done: a fused kernel that never writes att (flash-style tiles of q, k, v; no softmax, so no
running max or rescale) would also skip the upper triangle's GEMM work, ~25 GFLOP, and the ~1.6 GB
of att's write and read; in plain fp32 FMA it would have to beat cuBLAS's SGEMM on the other half.

No CUDA graph: the forward is ~7 launches of hundreds of microseconds each; a graph would add a
copy of the 50 MB input and a clone of the 50 MB output per call. Off the GPU the three passes are
eager's own ops.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1

_k = cudal1.load_cuda(r"""
// att: R rows of T scores, R = B * nh * T, row r the query i = r % T of its (batch, head). In place:
// att[r][j] = j <= i ? relu(att[r][j] * scale) : 0, as masked_fill(-inf) then relu.
extern "C" __global__ void scale_causal_relu(float* __restrict__ att, long long T, float scale) {
    const long long r = blockIdx.x, i = r % T;
    float* row = att + r * T;
    for (long long j = threadIdx.x; j < T; j += blockDim.x) {
        float v = 0.f;  // above the diagonal: never read
        if (j <= i) {
            v = row[j] * scale;
            v = v > 0.f ? v : (v == v ? 0.f : v);  // torch.relu: NaN stays NaN
        }
        row[j] = v;
    }
}""")


class ModelNew(nn.Module):
    def __init__(self, n_embd, n_head, max_seqlen):
        super().__init__()
        assert n_embd % n_head == 0
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)  # unused in forward, as in the task (its RNG draws count)
        self.register_buffer("bias", torch.tril(torch.ones(max_seqlen, max_seqlen)).view(1, 1, max_seqlen, max_seqlen))
        self.n_head = n_head
        self.n_embd = n_embd

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        scale = 1.0 / math.sqrt(k.size(-1))
        att = q @ k.transpose(-2, -1)  # (B, nh, T, T), contiguous
        if att.is_cuda and att.dtype == torch.float32 and att.is_contiguous():
            _k.scale_causal_relu(att.numel() // T, 256, att.data_ptr(), T, scale)
        else:  # eager's own ops
            att = F.relu((att * scale).masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf")))
        y = att @ v  # (B, nh, T, hs)
        return y.transpose(1, 2).contiguous().view(B, T, C)  # no c_proj
