"""Causal self-attention with the (T, T) score matrix never written: scaled_dot_product_attention.

At B = 128, T = 512, C = 768, 8 heads of 96, eager spends its time in two places. The GEMMs
(c_attn 65536 x 768 @ 768 x 2304, the two attention products, c_proj) are ~410 GFLOP -- cuBLAS
runs them in plain fp32 (matmul TF32 is off by default), so they are the floor here, the same for
eager and for this. And the scores: att is (128, 8, 512, 512) = 1.07 GB, written by q @ k^T, then
read and written again by the scale, by masked_fill and by softmax, and read by att @ v: ~8 GB of
traffic, ~1.7 ms at the H200's 4.8 TB/s, on top of q @ k^T and att @ v computing the masked upper
triangle they then throw away (51.5 GFLOP each, half of it wasted).

F.scaled_dot_product_attention(q, k, v, is_causal=True) does all of that in one kernel that keeps
scores in registers and shared memory, never writes att, and skips the key blocks above the
diagonal. For fp32 SDPA picks the memory-efficient (CUTLASS) kernel -- flash and cuDNN attention
take only fp16/bf16 -- and on sm80+ that kernel multiplies fp32 on tensor cores as three TF32
products (CUTLASS's OpMultiplyAddFastF32, the big/small split), which keeps fp32 accuracy, so it
passes the strict check where a plain TF32 product would not. Its online softmax sums in another
order than eager's, a last-bits difference. The ~310 GFLOP of c_attn and c_proj stay as they are.
The efficient kernel writes its output as (B, T, nh, hs) underneath, so the head merge should be a
view (reshape copies only if it is not).

Measured on the H200: 1.52x vs eager (12.2 ms -> 8.06 ms). The 4.2 ms saved is more than a
traffic-and-FLOP count gives the attention part (two fp32 bmm's of ~2 ms together plus ~1.7 ms of
score traffic, against ~1 ms fused), so eager's score passes most likely run below the H200's peak
bandwidth. There is no TF32 race: eager's matmuls are fp32 too, and it meets the strict tolerance.

No CUDA graph: the forward is ~6 launches of milliseconds each, and a graph would add a copy of the
201 MB input and a clone of the 201 MB output per call. The causal mask buffer is kept (same
state_dict) but not read: is_causal=True is the same lower triangle, since T <= max_seqlen.
Dropout p = 0 here; p > 0 would go to SDPA's own dropout (same distribution, not the same draws).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, n_embd, n_head, attn_pdrop, resid_pdrop, max_seqlen):
        super().__init__()
        assert n_embd % n_head == 0
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.attn_dropout = nn.Dropout(attn_pdrop)
        self.resid_dropout = nn.Dropout(resid_pdrop)
        self.register_buffer("bias", torch.tril(torch.ones(max_seqlen, max_seqlen)).view(1, 1, max_seqlen, max_seqlen))
        self.n_head = n_head
        self.n_embd = n_embd

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs), strided views
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        p = self.attn_dropout.p if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)  # (B, nh, T, hs), scale 1/sqrt(hs)
        y = y.transpose(1, 2).reshape(B, T, C)  # heads side by side
        return self.resid_dropout(self.c_proj(y))
