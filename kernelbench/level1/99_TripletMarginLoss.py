"""Triplet margin loss (margin 1.0, p = 2) over (128, 4096) anchor, positive, negative rows.

d(a, b) = ||a - b + eps||_2 per row (eps = 1e-6 added to the difference);
loss = mean over rows of max(d(anchor, positive) - d(anchor, negative) + margin, 0), a 0-dim scalar.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, margin: float = 1.0):
        super().__init__()
        self.loss_fn = nn.TripletMarginLoss(margin=margin)  # no parameters

    def forward(self, anchor, positive, negative):
        return self.loss_fn(anchor, positive, negative)


batch_size = 128
input_shape = (4096,)
dim = 1


def get_inputs():
    return [torch.randn(batch_size, *input_shape), torch.randn(batch_size, *input_shape),
            torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return [1.0]  # margin
