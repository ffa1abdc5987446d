"""Self-attention over the pixels of an image, residual add, LayerNorm over channels:
(batch, embed_dim, H, W) -> (batch, embed_dim, H, W).

nn.MultiheadAttention runs sequence-first (batch_first=False) with need_weights left at True, so
the reference also computes head-averaged attention weights it then discards. At the test size
the sequence is H*W = 16384 tokens, so the full attention matrix is large.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        self.attn = nn.MultiheadAttention(embed_dim, num_heads)
        self.norm = nn.LayerNorm(embed_dim)

    def forward(self, x):
        B, C, H, W = x.shape
        x = x.view(B, C, H * W).permute(2, 0, 1)  # (L, B, C), sequence first
        attn_output, _ = self.attn(x, x, x)
        x = self.norm(attn_output + x)
        return x.permute(1, 2, 0).view(B, C, H, W)


embed_dim = 128
num_heads = 4
batch_size = 2
num_channels = embed_dim
image_height = 128
image_width = 128


def get_inputs():
    return [torch.randn(batch_size, num_channels, image_height, image_width)]


def get_init_inputs():
    return [embed_dim, num_heads]
