"""Cross-entropy loss of (4096, 10) logits against int64 class indices; output a 0-dim scalar.

Defaults: mean over the batch of -log_softmax(predictions, dim=1)[n, targets[n]], no class
weights, no label smoothing. The targets are drawn after the logits.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return F.cross_entropy(predictions, targets)


batch_size = 4096
num_classes = 10
input_shape = (num_classes,)
dim = 1


def get_inputs():
    return [torch.randn(batch_size, *input_shape), torch.randint(0, num_classes, (batch_size,))]


def get_init_inputs():
    return []
