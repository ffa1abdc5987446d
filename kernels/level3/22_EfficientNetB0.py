"""EfficientNet-B0 (the task's simplified one: no SE, ReLU/ReLU6) replayed from one CUDA graph
(cudal1.CudaGraph), convs in true fp32: the reference's forward, op for op, launched once.

At batch 10 the forward is 40 convs (the stem, 13 depthwise, 12 expanding and 13 projecting 1x1
convs, the 1x1 head to 1280), each followed by a training-mode BatchNorm (cuDNN kernel plus the
num_batches_tracked add), 25 in-place ReLU6s and two ReLUs, six residual adds, the global average
pool and the Linear: ~155 launches. The GPU work is small: ~6.3 GFLOP, most of it in the 1x1 convs,
and activations of at most 48 MB (block 1's (10, 96, 112, 112) expansion); blocks 6-12 (7 of 13) run
entirely at 14 x 14 or 7 x 7, where one op is a few microseconds of GPU time and less than the host
spends launching it in eager. The graph replays the whole sequence with one launch; copying the 6 MB
input in and cloning the (10, 1000) output are negligible. BatchNorm keeps training-mode semantics
inside the graph: batch statistics, and the running statistics updated in place at each replay. The
residual adds stay in place on the projection BN's fresh output, as in the reference.

TF32: the depthwise convs never use tensor cores; the 1x1 convs do in eager, whose default TF32 is
140x outside the strict tolerance here, so they run in fp32 (~67 TFLOP/s peak), about 0.1 ms for
~6.3 GFLOP even at peak. Measured on the H200: 2.60x vs eager (4.69 ms -> 1.80 ms): eager is
host-bound at ~155 launches, its time spreading by 1.0 ms between rounds (interquartile range)
against the graph's 0.02 ms.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1


class MBConv(nn.Module):
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
            x = self.expand_conv(x)
        x = self.depthwise_conv(x)
        x = self.project_conv(x)
        if self.use_residual:
            x += identity
        return x


class ModelNew(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, kernel_size=3, stride=2, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(32)
        self.blocks = nn.Sequential(
            # MBConv(in, out, kernel_size, stride, expand_ratio)
            MBConv(32, 16, 3, 1, 1),
            MBConv(16, 24, 3, 2, 6),
            MBConv(24, 24, 3, 1, 6),
            MBConv(24, 40, 5, 2, 6),
            MBConv(40, 40, 5, 1, 6),
            MBConv(40, 80, 3, 2, 6),
            MBConv(80, 80, 3, 1, 6),
            MBConv(80, 112, 5, 1, 6),
            MBConv(112, 112, 5, 1, 6),
            MBConv(112, 192, 5, 2, 6),
            MBConv(192, 192, 5, 1, 6),
            MBConv(192, 192, 5, 1, 6),
            MBConv(192, 320, 3, 1, 6),
        )
        self.conv2 = nn.Conv2d(320, 1280, kernel_size=1, stride=1, padding=0, bias=False)
        self.bn2 = nn.BatchNorm2d(1280)
        self.fc = nn.Linear(1280, num_classes)
        self.graph = cudal1.CudaGraph(self._forward)  # captured at the first CUDA call

    def _forward(self, x):
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # true fp32 convs, as the check requires (set at capture)
        try:
            x = F.relu(self.bn1(self.conv1(x)), inplace=True)  # (B, 32, H/2, W/2)
            x = self.blocks(x)  # (B, 320, H/32, W/32)
            x = F.relu(self.bn2(self.conv2(x)), inplace=True)
            x = F.adaptive_avg_pool2d(x, (1, 1))
            return self.fc(x.view(x.size(0), -1))
        finally:
            torch.backends.cudnn.allow_tf32 = tf32

    def forward(self, x):
        return self.graph(x)
