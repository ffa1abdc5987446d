"""MaxPool1d on a (batch_size, features, sequence_length) input: kernel 4, stride 2, padding 2,
dilation 3, giving (16, 64, 62). Padding acts as -inf; values only (no indices).
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, kernel_size: int, stride: int = None, padding: int = 0,
                 dilation: int = 1, return_indices: bool = False):
        super().__init__()
        self.maxpool = nn.MaxPool1d(kernel_size=kernel_size, stride=stride, padding=padding,
                                    dilation=dilation, return_indices=return_indices)

    def forward(self, x):
        # L_out = floor((L + 2 * padding - dilation * (kernel_size - 1) - 1) / stride) + 1
        return self.maxpool(x)


batch_size = 16
features = 64
sequence_length = 128
kernel_size = 4
stride = 2
padding = 2
dilation = 3
return_indices = False


def get_inputs():
    x = torch.randn(batch_size, features, sequence_length)
    return [x]


def get_init_inputs():
    return [kernel_size, stride, padding, dilation, return_indices]
