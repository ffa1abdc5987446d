"""The MBConv block as the reference runs it, with cuDNN's TF32 off, and no CUDA graph: an honest
strict-fp32 baseline for a task bound by bandwidth and fp32 arithmetic, slower than eager.

The forward is ~10 launches over very large tensors: the 1x1 expand conv 112 -> 672 writes
(10, 672, 224, 224), 1.35 GB; its BatchNorm (batch statistics: one read for the statistics, one read
and one write to apply) and the in-place ReLU6 pass over it again; the 5x5 stride-2 depthwise conv
reads it and writes 337 MB, then BN and ReLU6; the 1x1 project conv 672 -> 192 writes 96 MB, then BN.
That is ~12 GB of DRAM traffic, ~2.6 ms at H200 bandwidth, for both sides. The arithmetic is 112
GFLOP, 96% of it in the two 1x1 convs (75.5 and 32.4 GFLOP): eager's timed run lets cuDNN do them in
TF32 on tensor cores (~494 TFLOP/s dense), 27x outside the strict tolerance, while the strict check
forces fp32 (~67 TFLOP/s peak: 1.6 ms for these 108 GFLOP even at peak).
Measured on the H200: 0.67x vs eager (4.87 ms -> 7.23 ms), slower by 2.4 ms: the losing side of
the TF32 race.

A CUDA graph would save ~10 launches that already hide behind milliseconds of GPU work, and would add
a copy of the 225 MB input and a clone of the 96 MB output (~0.13 ms of traffic), so there is none.
What would win: applying the expand BN and ReLU6 while the depthwise conv loads its input (a custom
kernel: ~4 GB less traffic over the 1.35 GB tensor) and 1x1 convs as GEMMs exact to fp32 on tensor
cores (3xTF32 splitting).
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
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
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # true fp32, as the check requires
        try:
            identity = x
            if hasattr(self, "expand_conv"):
                x = self.expand_conv(x)  # (B, hidden, H, W)
            x = self.depthwise_conv(x)  # (B, hidden, H/stride, W/stride)
            x = self.project_conv(x)  # (B, out, H/stride, W/stride), BN's fresh output
            if self.use_residual:
                x += identity  # in place on BN's output, never on the input
            return x
        finally:
            torch.backends.cudnn.allow_tf32 = tf32
