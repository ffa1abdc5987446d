"""Mamba-2 SSD (state-space duality) chunked scan, returning the final inter-chunk state:
X (batch, seq_length, n_heads, d_head) -> (batch, n_heads, d_head, d_state).

A, B, C are learned parameters whose shapes are tied to batch_size and seq_length (the input only
supplies X); A ~ N(0, 1) is not forced negative, so the exp(cumsum) "decays" can grow: at the
full size (seed 0) |state| up to ~2e15, so only a relative tolerance is meaningful. fp32.
The original uses einops.rearrange; here the same reshapes are plain view/permute calls.
The sequence is split chunk-major: position t = chunk * block_len + offset.
Y_diag is still computed (as in the original) though it does not reach the output.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
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

    def segsum(self, x):
        """S[..., i, j] = x[..., j+1] + ... + x[..., i] for j <= i, -inf above the diagonal."""
        T = x.size(-1)
        x_cumsum = torch.cumsum(x, dim=-1)
        x_segsum = x_cumsum[..., :, None] - x_cumsum[..., None, :]
        mask = torch.tril(torch.ones(T, T, device=x.device, dtype=torch.bool), diagonal=0)
        return x_segsum.masked_fill(~mask, -torch.inf)

    def forward(self, X, initial_states=None):
        b, L, h, p = X.shape
        l = self.block_len
        c = L // l
        # split the sequence into c chunks of l steps: (b, c, l, ...)
        X_blocks = X.reshape(b, c, l, h, p)
        A_blocks = self.A.reshape(b, c, l, h)
        B_blocks = self.B.reshape(b, c, l, h, -1)
        C_blocks = self.C.reshape(b, c, l, h, -1)
        A_blocks = A_blocks.permute(0, 3, 1, 2)  # (b, h, c, l)
        A_cumsum = torch.cumsum(A_blocks, dim=-1)

        # 1. outputs from inputs of the same chunk (the quadratic, attention-like part)
        L_mat = torch.exp(self.segsum(A_blocks))  # (b, h, c, l, l)
        Y_diag = torch.einsum("bclhn,bcshn,bhcls,bcshp->bclhp", C_blocks, B_blocks, L_mat, X_blocks)

        # 2. each chunk's contribution to the state at its end
        decay_states = torch.exp(A_cumsum[:, :, :, -1:] - A_cumsum)  # (b, h, c, l)
        states = torch.einsum("bclhn,bhcl,bclhp->bchpn", B_blocks, decay_states, X_blocks)  # (b, c, h, p, n)

        # 3. pass the states from chunk to chunk (a c+1 step recurrence, written as a matmul)
        if initial_states is None:
            initial_states = torch.zeros_like(states[:, :1])
        states = torch.cat([initial_states, states], dim=1)  # (b, c+1, h, p, n)
        decay_chunk = torch.exp(self.segsum(F.pad(A_cumsum[:, :, :, -1], (1, 0))))  # (b, h, c+1, c+1)
        states = torch.einsum("bhzc,bchpn->bzhpn", decay_chunk, states)  # (b, c+1, h, p, n)
        return states[:, -1]  # state after the last chunk, (b, h, p, n)


batch_size = 16
seq_length = 128
n_heads = 8
d_head = 64
d_state = 16
block_len = 64


def get_inputs():
    return [torch.randn(batch_size, seq_length, n_heads, d_head)]


def get_init_inputs():
    return [batch_size, seq_length, n_heads, d_head, d_state, block_len]
