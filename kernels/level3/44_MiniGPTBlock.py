"""A minGPT block with fused attention (scaled_dot_product_attention) and a one-kernel tanh GELU.

At B = 128, T = 512, C = 768 the block is GEMM-bound: c_attn, c_proj, and the MLP's c_fc (768 ->
3072) and c_proj (3072 -> 768) are ~930 GFLOP that cuBLAS runs in plain fp32 (matmul TF32 is off
by default) for eager and for this alike, most of eager's time. Two things around them are pure
memory traffic, and both go:

- Attention. Eager writes the (128, 8, 512, 512) score matrix (1.07 GB) and passes over it four
  more times (scale, masked_fill, softmax, att @ v), ~8 GB, ~1.7 ms at 4.8 TB/s, besides computing
  the masked upper triangle in both bmm's. F.scaled_dot_product_attention(is_causal=True) keeps the
  scores on chip and skips the blocks above the diagonal. For fp32 it runs the memory-efficient
  (CUTLASS) kernel, whose fp32 products on sm80+ are three TF32 products each
  (OpMultiplyAddFastF32: fp32 accuracy on tensor cores), so it holds the strict check.
- NewGELU. 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))) is eight elementwise kernels
  on the (65536, 3072) hidden activation (805 MB): ten reads and eight writes, ~14.5 GB, ~3 ms.
  F.gelu(approximate="tanh") is the same formula in one kernel (one read, one write, ~0.35 ms),
  computed in fp32 as eager's; the rounding differs in the last bits (x*x*x against pow, the order
  of the multiplies).

Measured on the H200: 1.34x vs eager (28.1 ms -> 20.9 ms). The 7.2 ms saved is more than the ~5 ms
the traffic count predicted, most likely because eager's elementwise passes run below peak
bandwidth; what is left is mostly the fp32 GEMMs, the floor of both sides. There is no TF32 race:
eager's matmuls are fp32 too, and it meets the strict tolerance. The LayerNorms, residual adds and
Linears are eager's own kernels. The act slot of the MLP ModuleDict holds nn.GELU("tanh") in place
of NewGELU (neither has parameters, so the state_dict is the same), and the block calls the MLP
directly instead of through the task's lambda.

No CUDA graph: ~15 launches of milliseconds each, and a graph would add a copy of the 201 MB
input and a clone of the 201 MB output per call. The causal mask buffer is kept (same state_dict)
but not read: is_causal=True is the same lower triangle for T <= max_seqlen. Dropouts are p = 0
here; p > 0 would go to SDPA's own dropout (same distribution, not the same draws).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
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
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)  # (B, nh, T, hs)
        y = y.transpose(1, 2).reshape(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class ModelNew(nn.Module):
    def __init__(self, n_embd, n_head, attn_pdrop, resid_pdrop, max_seqlen):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, attn_pdrop, resid_pdrop, max_seqlen)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.ModuleDict(dict(
            c_fc=nn.Linear(n_embd, 4 * n_embd),
            c_proj=nn.Linear(4 * n_embd, n_embd),
            act=nn.GELU(approximate="tanh"),  # NewGELU's formula, one kernel
            dropout=nn.Dropout(resid_pdrop),
        ))

    def forward(self, x):
        m = self.mlp
        x = x + self.attn(self.ln_1(x))
        x = x + m.dropout(m.c_proj(m.act(m.c_fc(self.ln_2(x)))))  # (B, T, C)
        return x
