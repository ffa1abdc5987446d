"""MobileNet v1: a 3x3 conv then 13 depthwise-separable blocks (each conv followed by BN+ReLU),
7x7 average pool, Linear: (batch, 3, 224, 224) -> (batch, num_classes).

BatchNorm runs in training mode (batch statistics). The fixed AvgPool2d(7) assumes the final
map is 7x7, i.e. a 224x224 input; alpha is the width multiplier.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, num_classes=1000, input_channels=3, alpha=1.0):
        super().__init__()

        def conv_bn(inp, oup, stride):
            return nn.Sequential(
                nn.Conv2d(inp, oup, 3, stride, 1, bias=False),
                nn.BatchNorm2d(oup),
                nn.ReLU(inplace=True),
            )

        def conv_dw(inp, oup, stride):
            return nn.Sequential(
                nn.Conv2d(inp, inp, 3, stride, 1, groups=inp, bias=False),  # depthwise
                nn.BatchNorm2d(inp),
                nn.ReLU(inplace=True),
                nn.Conv2d(inp, oup, 1, 1, 0, bias=False),  # pointwise
                nn.BatchNorm2d(oup),
                nn.ReLU(inplace=True),
            )

        def w(c):
            return int(c * alpha)

        self.model = nn.Sequential(
            conv_bn(input_channels, w(32), 2),
            conv_dw(w(32), w(64), 1),
            conv_dw(w(64), w(128), 2),
            conv_dw(w(128), w(128), 1),
            conv_dw(w(128), w(256), 2),
            conv_dw(w(256), w(256), 1),
            conv_dw(w(256), w(512), 2),
            conv_dw(w(512), w(512), 1),
            conv_dw(w(512), w(512), 1),
            conv_dw(w(512), w(512), 1),
            conv_dw(w(512), w(512), 1),
            conv_dw(w(512), w(512), 1),
            conv_dw(w(512), w(1024), 2),
            conv_dw(w(1024), w(1024), 1),
            nn.AvgPool2d(7),
        )
        self.fc = nn.Linear(w(1024), num_classes)

    def forward(self, x):
        x = self.model(x)  # (B, 1024 * alpha, 1, 1)
        x = x.view(x.size(0), -1)
        return self.fc(x)


batch_size = 10
input_channels = 3
height = 224
width = 224
num_classes = 1000
alpha = 1.0


def get_inputs():
    return [torch.randn(batch_size, input_channels, height, width)]


def get_init_inputs():
    return [num_classes, input_channels, alpha]
