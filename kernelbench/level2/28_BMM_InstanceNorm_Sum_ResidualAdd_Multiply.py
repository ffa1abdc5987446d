"""Linear layer, InstanceNorm2d over each row, then (x + y) * y: inputs (batch, 64), (batch, 128) -> (batch, 128).

Quirk of the original, kept on purpose: the row is viewed as (B, 1, 1, out_features), so the
instance norm sees ONE channel and normalizes each row over its out_features values (biased
variance, eps=1e-5, no affine). num_features=out_features does not match that single channel;
PyTorch only warns.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features, eps=1e-5, momentum=0.1):
        super().__init__()
        self.bmm = nn.Linear(in_features, out_features)
        self.instance_norm = nn.InstanceNorm2d(out_features, eps=eps, momentum=momentum)

    def forward(self, x, y):
        x = self.bmm(x)  # (B, out_features)
        x = self.instance_norm(x.unsqueeze(1).unsqueeze(1)).squeeze(1).squeeze(1)  # via (B, 1, 1, F)
        x = x + y
        x = x * y
        return x


batch_size = 128
in_features = 64
out_features = 128


def get_inputs():
    return [torch.randn(batch_size, in_features), torch.randn(batch_size, out_features)]


def get_init_inputs():
    return [in_features, out_features]
