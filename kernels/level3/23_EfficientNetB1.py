"""EfficientNet-B1 (the task's simplified one: seven single blocks, no SE, no skips) replayed from one
CUDA graph (cudal1.CudaGraph), convs in true fp32: the reference's forward, op for op, launched once.

At batch 10 and 240 x 240 the forward is 23 convs (the stem, 7 blocks of 1x1 expand, 3x3 depthwise
and 1x1 project, the 1x1 head to 1280), each followed by a training-mode BatchNorm (cuDNN kernel
plus the num_batches_tracked add), 14 in-place ReLU6s and two ReLUs, the global average pool and the
Linear: ~90 launches. The GPU work is small: ~4.4 GFLOP, and activations of at most 55 MB (block 2's
(10, 96, 120, 120) expansion); blocks 5-7 run at 15 x 15 or 8 x 8, where one op is a few microseconds
of GPU time and less than the host spends launching it in eager. The graph replays the whole
sequence with one launch; copying the 7 MB input in and cloning the (10, 1000) output are
negligible. BatchNorm keeps training-mode semantics inside the graph: batch statistics, and the
running statistics updated in place at each replay.

TF32: the depthwise convs never use tensor cores; the 1x1 convs do in eager, whose default TF32 is
50x outside the strict tolerance here, so they run in fp32 (~67 TFLOP/s peak), well under 0.1 ms
for ~4 GFLOP even at peak. Measured on the H200: 1.94x vs eager (2.62 ms -> 1.35 ms): eager is
host-bound, its time spreading by 0.56 ms between rounds (interquartile range) against the
graph's 0.02 ms.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1


class ModelNew(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, kernel_size=3, stride=2, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(32)
        self.mbconv1 = self._make_mbconv_block(32, 16, 1, 1)
        self.mbconv2 = self._make_mbconv_block(16, 24, 2, 6)
        self.mbconv3 = self._make_mbconv_block(24, 40, 2, 6)
        self.mbconv4 = self._make_mbconv_block(40, 80, 2, 6)
        self.mbconv5 = self._make_mbconv_block(80, 112, 1, 6)
        self.mbconv6 = self._make_mbconv_block(112, 192, 2, 6)
        self.mbconv7 = self._make_mbconv_block(192, 320, 1, 6)
        self.conv2 = nn.Conv2d(320, 1280, kernel_size=1, stride=1, padding=0, bias=False)
        self.bn2 = nn.BatchNorm2d(1280)
        self.fc = nn.Linear(1280, num_classes)
        self.graph = cudal1.CudaGraph(self._forward)  # captured at the first CUDA call

    def _make_mbconv_block(self, in_channels, out_channels, stride, expand_ratio):
        hidden_dim = round(in_channels * expand_ratio)
        return nn.Sequential(
            nn.Conv2d(in_channels, hidden_dim, kernel_size=1, stride=1, padding=0, bias=False),
            nn.BatchNorm2d(hidden_dim),
            nn.ReLU6(inplace=True),
            nn.Conv2d(hidden_dim, hidden_dim, kernel_size=3, stride=stride, padding=1, groups=hidden_dim, bias=False),
            nn.BatchNorm2d(hidden_dim),
            nn.ReLU6(inplace=True),
            nn.Conv2d(hidden_dim, out_channels, kernel_size=1, stride=1, padding=0, bias=False),
            nn.BatchNorm2d(out_channels),
        )

    def _forward(self, x):
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # true fp32 convs, as the check requires (set at capture)
        try:
            x = F.relu(self.bn1(self.conv1(x)), inplace=True)  # (B, 32, 120, 120) at 240
            for block in (self.mbconv1, self.mbconv2, self.mbconv3, self.mbconv4, self.mbconv5,
                          self.mbconv6, self.mbconv7):
                x = block(x)  # ends (B, 320, 8, 8) at 240
            x = F.relu(self.bn2(self.conv2(x)), inplace=True)
            x = F.adaptive_avg_pool2d(x, (1, 1))
            return self.fc(torch.flatten(x, 1))
        finally:
            torch.backends.cudnn.allow_tf32 = tf32

    def forward(self, x):
        return self.graph(x)
