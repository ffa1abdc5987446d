"""Smooth L1 (Huber, beta = 1) loss, mean over all elements of two (128, 4096) inputs.

With d = predictions - targets: 0.5 * d^2 where |d| < 1, else |d| - 0.5. Output a 0-dim scalar.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return F.smooth_l1_loss(predictions, targets)


batch_size = 128
input_shape = (4096,)
dim = 1


def get_inputs():
    return [torch.randn(batch_size, *input_shape), torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
