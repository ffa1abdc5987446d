"""AvgPool1d on a (batch_size, in_channels, input_length) input: kernel 4, stride 2, padding 1,
giving (16, 32, 64). count_include_pad: border windows still divide by 4.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, kernel_size: int, stride: int = 1, padding: int = 0):
        super().__init__()
        self.avg_pool = nn.AvgPool1d(kernel_size=kernel_size, stride=stride, padding=padding)

    def forward(self, x):
        return self.avg_pool(x)


batch_size = 16
in_channels = 32
input_length = 128
kernel_size = 4
stride = 2
padding = 1


def get_inputs():
    x = torch.randn(batch_size, in_channels, input_length)
    return [x]


def get_init_inputs():
    return [kernel_size, stride, padding]
