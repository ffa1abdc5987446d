"""MaxPool2d on a (batch_size, channels, height, width) input: 2x2 window, stride 2, padding 1,
dilation 3, giving (16, 32, 64, 64). Padding acts as -inf.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, kernel_size: int, stride: int, padding: int, dilation: int):
        super().__init__()
        self.maxpool = nn.MaxPool2d(kernel_size=kernel_size, stride=stride, padding=padding,
                                    dilation=dilation)

    def forward(self, x):
        return self.maxpool(x)


batch_size = 16
channels = 32
height = 128
width = 128
kernel_size = 2
stride = 2
padding = 1
dilation = 3


def get_inputs():
    x = torch.randn(batch_size, channels, height, width)
    return [x]


def get_init_inputs():
    return [kernel_size, stride, padding, dilation]
