"""ShuffleNet unit: 1x1 group conv, 3x3 depthwise conv, channel shuffle, 1x1 group conv, plus a
shortcut: (batch, in_channels, H, W) -> (batch, out_channels, H, W).

Deviations from the paper kept on purpose: the shuffle comes after the depthwise conv (not after
the first group conv), and ReLU is applied before the residual add, not after it. The shortcut
is a 1x1 conv+BN when in != out (the test config, 240 -> 480). BatchNorm runs in training mode.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ChannelShuffle(nn.Module):
    def __init__(self, groups):
        super().__init__()
        self.groups = groups

    def forward(self, x):
        batch_size, channels, height, width = x.size()
        channels_per_group = channels // self.groups
        x = x.view(batch_size, self.groups, channels_per_group, height, width)
        x = x.transpose(1, 2).contiguous()  # new channel j*groups+i <- old channel i*cpg+j
        return x.view(batch_size, -1, height, width)


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, groups=3):
        super().__init__()
        assert out_channels % 4 == 0
        mid_channels = out_channels // 4
        # 1x1 group conv, 3x3 depthwise conv, 1x1 group conv
        self.conv1 = nn.Conv2d(in_channels, mid_channels, 1, stride=1, padding=0, groups=groups, bias=False)
        self.bn1 = nn.BatchNorm2d(mid_channels)
        self.conv2 = nn.Conv2d(mid_channels, mid_channels, 3, stride=1, padding=1, groups=mid_channels, bias=False)
        self.bn2 = nn.BatchNorm2d(mid_channels)
        self.conv3 = nn.Conv2d(mid_channels, out_channels, 1, stride=1, padding=0, groups=groups, bias=False)
        self.bn3 = nn.BatchNorm2d(out_channels)
        self.shuffle = ChannelShuffle(groups)
        if in_channels == out_channels:
            self.shortcut = nn.Sequential()
        else:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, kernel_size=1, stride=1, padding=0, bias=False),
                nn.BatchNorm2d(out_channels),
            )

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))  # no activation after the depthwise conv
        out = self.shuffle(out)
        out = F.relu(self.bn3(self.conv3(out)))
        out += self.shortcut(x)  # no ReLU after the add
        return out


batch_size = 10
input_channels = 240
out_channels = 480
groups = 3
height = 224
width = 224
num_classes = 1000


def get_inputs():
    return [torch.randn(batch_size, input_channels, height, width)]


def get_init_inputs():
    return [input_channels, out_channels, groups]
