"""The output is identically one: skip the GEMM, the dropout, the mean and the softmax.

After `mean(dim=1, keepdim=True)` the tensor is (batch, 1), and a softmax over a dim of size one
is exp(v - v) / exp(v - v) = 1.0 for every finite v. Whatever the input, the weights and the
dropout mask (dropout stays live in training mode, but only changes which finite values reach the
mean), the result is a (batch, 1) tensor of ones, so forward allocates it with one torch.ones
call: a single tiny fill kernel instead of the Linear, the dropout (a random-mask kernel), the
mean and the softmax -- five launches and their dispatch. Everything is launch-bound here (128 x 100
x 50). Measured: 3.62x on H200 (0.26 -> 0.073 ms). Caveat: an inf or NaN in the input would make the
reference NaN where this gives 1. The Linear and Dropout modules are kept so that the parameters and
the state_dict match the reference.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, dropout_p):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.dropout = nn.Dropout(dropout_p)

    def forward(self, x):
        if x.dim() != 2:  # the identity needs the mean to leave a size-1 dim 1
            return torch.softmax(torch.mean(self.dropout(self.matmul(x)), dim=1, keepdim=True), dim=1)
        return torch.ones(x.shape[0], 1, device=x.device, dtype=x.dtype)  # (B, 1)
