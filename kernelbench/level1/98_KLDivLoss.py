"""KL divergence KL(targets || predictions) between rows of probabilities, 'batchmean'.

Both inputs are randn(128, 4096).softmax(dim=-1) (predictions drawn first), strictly positive.
The total sum of targets * (log targets - log predictions) is divided by the batch size (128),
not by the element count. Output a 0-dim scalar.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return F.kl_div(torch.log(predictions), targets, reduction="batchmean")


batch_size = 128
input_shape = (4096,)
dim = 1


def get_inputs():
    return [torch.randn(batch_size, *input_shape).softmax(dim=-1),
            torch.randn(batch_size, *input_shape).softmax(dim=-1)]


def get_init_inputs():
    return []
