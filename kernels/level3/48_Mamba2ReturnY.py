"""The Mamba-2 SSD chunked scan replayed from one CUDA graph: ~50 small kernels, one launch.

Everything here is small: X is (16, 128, 8, 64) (4 MB), A, B and C are parameters of (16, 128, 8)
and (16, 128, 8, 16), there are c = 2 chunks of l = 64 steps, and the largest intermediates are a
few MB. The forward is a chain of ~50 tiny kernels: two segsums (cumsum, the broadcast difference, a
ones matrix, tril, its negation and masked_fill each), cumsum and four exps, and four einsums -- the
4-operand one for Y_diag contracts pairwise, left to right (no opt_einsum on the GPU machine), each
pairwise step a permute-copy and a bmm -- plus the cat, pad and final add. Eager takes 2.64 ms,
~50 us per kernel: torch.einsum's host side (parsing, permutes, reshapes) and the dispatch of each
op, not GPU time.

cudal1.CudaGraph records the forward at the first call and replays it with one launch, the GPU
running the kernels back to back; a copy of X into the graph's buffer and a clone of the 4 MB output
are added, a few us. Measured on the H200: 9.52x vs eager (2.64 ms -> 0.277 ms). The ops are the
task's own in the task's order, so the values agree with eager's up to the bmm's summation order
(should cuBLAS pick another kernel under capture), which matters here: A ~ N(0, 1) is not forced
negative, so the exp(cumsum) "decays" grow and |Y| reaches ~1e16, and only a relative error is
meaningful. No TF32: the einsums' bmm's run in fp32 (matmul TF32 is off by default), there is no
convolution, and eager meets the strict tolerance. Nothing depends on values (no branch), so one
graph serves every input; initial_states, when given, is one more graph input (a new capture for a
new signature).
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
        self.C = nn.Parameter(torch.randn(batch_size, seq_length, n_heads, d_state))
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
        A_blocks = self.A.reshape(b, c, l, h)
        B_blocks = self.B.reshape(b, c, l, h, -1)
        C_blocks = self.C.reshape(b, c, l, h, -1)
        A_blocks = A_blocks.permute(0, 3, 1, 2)  # (b, h, c, l)
        A_cumsum = torch.cumsum(A_blocks, dim=-1)

        # 1. outputs from inputs of the same chunk
        L_mat = torch.exp(self.segsum(A_blocks))  # (b, h, c, l, l)
        Y_diag = torch.einsum("bclhn,bcshn,bhcls,bcshp->bclhp", C_blocks, B_blocks, L_mat, X_blocks)

        # 2. each chunk's contribution to the state at its end
        decay_states = torch.exp(A_cumsum[:, :, :, -1:] - A_cumsum)  # (b, h, c, l)
        states = torch.einsum("bclhn,bhcl,bclhp->bchpn", B_blocks, decay_states, X_blocks)  # (b, c, h, p, n)

        # 3. pass the states from chunk to chunk
        if initial_states is None:
            initial_states = torch.zeros_like(states[:, :1])
        states = torch.cat([initial_states, states], dim=1)  # (b, c+1, h, p, n)
        decay_chunk = torch.exp(self.segsum(F.pad(A_cumsum[:, :, :, -1], (1, 0))))  # (b, h, c+1, c+1)
        states = torch.einsum("bhzc,bchpn->bzhpn", decay_chunk, states)  # (b, c+1, h, p, n)

        # 4. state -> output within each chunk
        states = states[:, :-1]  # state entering each chunk, (b, c, h, p, n)
        state_decay_out = torch.exp(A_cumsum)  # (b, h, c, l)
        Y_off = torch.einsum("bclhn,bchpn,bhcl->bclhp", C_blocks, states, state_decay_out)

        return (Y_diag + Y_off).reshape(b, -1, h, p)  # (b, c*l, h, p)

    def forward(self, X, initial_states=None):
        return self.graph(X, initial_states)
