"""Self-attention over 16384 pixels without the attention matrix: need_weights=False, so
nn.MultiheadAttention runs torch's fused scaled_dot_product_attention.

The reference calls nn.MultiheadAttention with need_weights left at True. That path materialises
the attention matrix: (B * heads, L, L) = 8 x 16384 x 16384 floats, 8.6 GB, written by the q k^T
bmm, read and written by softmax, read by the bmm with v, and read once more to average it over
heads for the weights the task then discards: ~40 GB of traffic (~8 ms at H200 bandwidth) on top
of ~275 GFLOP of exact-fp32 bmm. Dropping the unused weights is the whole change: with
need_weights=False the same module (same parameters, same in-projection, out-projection and
residual LayerNorm) hands q, k, v to scaled_dot_product_attention, and for fp32 at head_dim 32
that dispatches to the memory-efficient (cutlass) kernel, which streams k and v through shared
memory with an online softmax and never writes the L x L matrix: traffic falls to q, k and v
(16.8 MB each, k and v re-read per query tile, mostly from L2) and the output. Its fp32 GEMMs
use cutlass's OpMultiplyAddFastF32 (3xTF32 on the tensor cores: fp32-level accuracy, not plain
TF32), so it stays inside the strict check while the reference's bmms run on the CUDA cores.

Measured on the H200: 1.33x vs eager (19.4 ms -> 14.6 ms), not the several-fold gain the removed
traffic suggested. The ~275 GFLOP remain, now as 3x the TF32 count, and the fused kernel runs them
at only ~19 TFLOP/s of fp32 work: it, not memory, is now the limit, most likely because PyTorch runs
its sm80 (Ampere) build of this kernel on the H200. Going further needs an fp32-accurate attention
kernel written for Hopper's tensor cores. There is no TF32 race: the reference's bmms are fp32 and
eager already meets the strict tolerance.

No CUDA graph: the call is ~15 ops, the attention alone taking milliseconds, so launch overhead
is noise, and a graph would add a 16.8 MB copy in and a 16.8 MB clone out. No convolutions, no
state.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        self.attn = nn.MultiheadAttention(embed_dim, num_heads)
        self.norm = nn.LayerNorm(embed_dim)

    def forward(self, x):
        B, C, H, W = x.shape
        x = x.view(B, C, H * W).permute(2, 0, 1)  # (L, B, C), sequence first
        attn_output, _ = self.attn(x, x, x, need_weights=False)  # fused attention, no (B*heads, L, L) matrix
        x = self.norm(attn_output + x)
        return x.permute(1, 2, 0).view(B, C, H, W)
