"""EfficientNet MBConv block without squeeze-excitation: 1x1 expand, depthwise kxk, 1x1 project:
(batch, in, 224, 224) -> (batch, out, 224/stride, 224/stride).

BatchNorm runs in training mode (batch statistics). ReLU6 activations, none after the
projection. The residual add is used only when stride == 1 and in == out (not in the test
config: 112 -> 192, stride 2).
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, expand_ratio):
        super().__init__()
        self.use_residual = stride == 1 and in_channels == out_channels
        hidden_dim = in_channels * expand_ratio
        if expand_ratio != 1:
            self.expand_conv = nn.Sequential(
                nn.Conv2d(in_channels, hidden_dim, kernel_size=1, stride=1, padding=0, bias=False),
                nn.BatchNorm2d(hidden_dim),
                nn.ReLU6(inplace=True),
            )
        self.depthwise_conv = nn.Sequential(
            nn.Conv2d(hidden_dim, hidden_dim, kernel_size=kernel_size, stride=stride,
                      padding=(kernel_size - 1) // 2, groups=hidden_dim, bias=False),
            nn.BatchNorm2d(hidden_dim),
            nn.ReLU6(inplace=True),
        )
        self.project_conv = nn.Sequential(
            nn.Conv2d(hidden_dim, out_channels, kernel_size=1, stride=1, padding=0, bias=False),
            nn.BatchNorm2d(out_channels),
        )

    def forward(self, x):
        identity = x
        if hasattr(self, "expand_conv"):
            x = self.expand_conv(x)  # (B, hidden, H, W)
        x = self.depthwise_conv(x)  # (B, hidden, H/stride, W/stride)
        x = self.project_conv(x)  # (B, out, H/stride, W/stride)
        if self.use_residual:
            x += identity
        return x


batch_size = 10
in_channels = 112
out_channels = 192
kernel_size = 5
stride = 2
expand_ratio = 6


def get_inputs():
    return [torch.randn(batch_size, in_channels, 224, 224)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, expand_ratio]
