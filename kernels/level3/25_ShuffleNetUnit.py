"""The ShuffleNet unit as the reference runs it, with cuDNN's TF32 off and the ReLUs in place, and no
CUDA graph: an honest strict-fp32 baseline for a task bound by bandwidth and fp32 arithmetic,
slower than eager.

The forward is ~15 launches over very large tensors: the (10, 240, 224, 224) input is 482 MB, the
120-channel middle tensors 241 MB each and the 480-channel ones 963 MB. Grouped 1x1 conv, BN, ReLU,
depthwise 3x3, BN, the channel-shuffle copy, grouped 1x1 conv, BN, ReLU, the 1x1 shortcut conv and
its BN, and the add: ~17 GB of DRAM traffic (each 963 MB BatchNorm alone reads its input twice and
writes it once), ~3.5 ms at H200 bandwidth, the same for both sides. The in-place ReLUs save
F.relu's 241 MB and 963 MB output allocations, not traffic. The arithmetic is 146 GFLOP, 79% of it
in the dense 1x1 shortcut conv 240 -> 480 (116 GFLOP; the grouped convs 19 and 10, the depthwise
1): eager's timed run lets cuDNN do the 1x1 convs in TF32 on tensor cores (~494 TFLOP/s dense),
12x outside the strict tolerance, while the strict check forces fp32 (~67 TFLOP/s peak: 2.2 ms for
these 145 GFLOP even at peak).
Measured on the H200: 0.73x vs eager (7.23 ms -> 9.89 ms), slower by 2.7 ms: the losing side of
the TF32 race.

A CUDA graph would save ~15 launches that already hide behind milliseconds of GPU work and would add a
copy of the 482 MB input and a clone of the 963 MB output (~0.6 ms of traffic), so there is none. What
would win: one kernel for relu(bn3(conv3)) + bn(shortcut) once both statistics are known (reading
the two 963 MB tensors once and writing the output once, instead of ~7 GB of separate BN, ReLU and add
passes), and 1x1 convs as GEMMs exact to fp32 on tensor cores (3xTF32 splitting).
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
        x = x.view(batch_size, self.groups, channels // self.groups, height, width)
        x = x.transpose(1, 2).contiguous()  # new channel j*groups+i <- old channel i*cpg+j
        return x.view(batch_size, -1, height, width)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, groups=3):
        super().__init__()
        assert out_channels % 4 == 0
        mid_channels = out_channels // 4
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
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # true fp32, as the check requires
        try:
            out = F.relu(self.bn1(self.conv1(x)), inplace=True)  # (B, mid, H, W)
            out = self.bn2(self.conv2(out))  # no activation after the depthwise conv
            out = self.shuffle(out)
            out = F.relu(self.bn3(self.conv3(out)), inplace=True)  # (B, out, H, W), a fresh tensor
            return out.add_(self.shortcut(x))  # identity shortcut: x is only read; no ReLU after the add
        finally:
            torch.backends.cudnn.allow_tf32 = tf32
