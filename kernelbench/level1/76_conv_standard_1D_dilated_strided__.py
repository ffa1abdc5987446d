"""1-D convolution, kernel 3, stride 3, dilation 4, no padding, no bias:
(16, 3, 256) -> (16, 64, 83).
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 dilation: int = 1, bias: bool = False):
        super().__init__()
        self.conv1d = nn.Conv1d(in_channels, out_channels, kernel_size, stride=stride,
                                dilation=dilation, bias=bias)

    def forward(self, x):
        # L_out = floor((L - dilation * (k - 1) - 1) / stride) + 1
        return self.conv1d(x)


batch_size = 16
in_channels = 3
out_channels = 64
kernel_size = 3
length = 256
stride = 3
dilation = 4


def get_inputs():
    x = torch.randn(batch_size, in_channels, length)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, dilation]
