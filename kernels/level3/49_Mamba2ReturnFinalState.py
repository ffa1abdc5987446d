"""The Mamba-2 SSD final state, without the unused Y_diag, replayed from one CUDA graph.

The task returns only the state after the last chunk, (16, 8, 64, 16), yet computes Y_diag as well
(the original code does): exp(segsum(A)) over (16, 8, 2, 64, 64) and the 4-operand einsum that
contracts C, B, L and X pairwise -- about half the forward's ~45 kernels and its largest
intermediates, and none of it reaches the output. It has no side effects, so it is left out here
for every input (a NaN or inf in it could not reach the output either). What remains is the
task's own chain, in its order: the cumsum of A within each chunk, exp(A_cumsum[-1] - A_cumsum),
the 3-operand einsum for each chunk's end state, the zero initial state, cat, pad, a segsum over
the c + 1 = 3 chunk boundaries, its exp, and the 2-operand einsum that passes states from chunk to
chunk: ~20 tiny kernels on a few MB.

Eager takes 1.92 ms, ~40 us per kernel: einsum's host side and each op's dispatch, not GPU time.
cudal1.CudaGraph records the shortened forward at the first call and replays it with one launch; a
copy of X (4 MB) into the graph's buffer and a clone of the (16, 8, 64, 16) output are added, a few
us. Measured on the H200: 11.01x vs eager (1.92 ms -> 0.174 ms). The values agree with eager's up to
the bmm's summation order (should cuBLAS pick another kernel under capture); that matters, since
A ~ N(0, 1) is not forced negative, the exp(cumsum) factors grow and |state| reaches ~1e15, so only
a relative error is meaningful. No TF32: the bmm's run in fp32 (matmul TF32 is off by default), and
eager meets the strict tolerance. No branch on values, so one graph serves every input;
initial_states, when given, is one more graph input.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1


class ModelNew(nn.Module):
    def __init__(self, batch_size, seq_length, n_heads, d_head, d_state, block_len=64):
        super().__init__()
        assert seq_length % block_len == 0, "sequence length must be divisible by block length"
        self.batch_size = batch_size
        self.seq_length = seq_length
        self.n_heads = n_heads
        self.d_head = d_head
        self.d_state = d_state
        self.block_len = block_len
        self.A = nn.Parameter(torch.randn(batch_size, seq_length, n_heads))
        self.B = nn.Parameter(torch.randn(batch_size, seq_length, n_heads, d_state))
        self.C = nn.Parameter(torch.randn(batch_size, seq_length, n_heads, d_state))  # feeds only Y_diag
        self.graph = cudal1.CudaGraph(self._forward)

    def segsum(self, x):
        """S[..., i, j] = x[..., j+1] + ... + x[..., i] for j <= i, -inf above the diagonal."""
        T = x.size(-1)
        x_cumsum = torch.cumsum(x, dim=-1)
        x_segsum = x_cumsum[..., :, None] - x_cumsum[..., None, :]
        mask = torch.tril(torch.ones(T, T, device=x.device, dtype=torch.bool), diagonal=0)
        return x_segsum.masked_fill(~mask, -torch.inf)

    def _forward(self, X, initial_states):
        b, L, h, p = X.shape
        l = self.block_len
        c = L // l
        X_blocks = X.reshape(b, c, l, h, p)  # chunk-major: t = chunk * l + offset
        A_blocks = self.A.reshape(b, c, l, h).permute(0, 3, 1, 2)  # (b, h, c, l)
        B_blocks = self.B.reshape(b, c, l, h, -1)
        A_cumsum = torch.cumsum(A_blocks, dim=-1)

        # (Y_diag, the task's step 1, is skipped: it never reaches the returned state.)
        # 2. each chunk's contribution to the state at its end
        decay_states = torch.exp(A_cumsum[:, :, :, -1:] - A_cumsum)  # (b, h, c, l)
        states = torch.einsum("bclhn,bhcl,bclhp->bchpn", B_blocks, decay_states, X_blocks)  # (b, c, h, p, n)

        # 3. pass the states from chunk to chunk
        if initial_states is None:
            initial_states = torch.zeros_like(states[:, :1])
        states = torch.cat([initial_states, states], dim=1)  # (b, c+1, h, p, n)
        decay_chunk = torch.exp(self.segsum(F.pad(A_cumsum[:, :, :, -1], (1, 0))))  # (b, h, c+1, c+1)
        states = torch.einsum("bhzc,bchpn->bzhpn", decay_chunk, states)  # (b, c+1, h, p, n)
        return states[:, -1]  # state after the last chunk, (b, h, p, n)

    def forward(self, X, initial_states=None):
        return self.graph(X, initial_states)
