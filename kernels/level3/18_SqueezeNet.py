"""SqueezeNet at batch 1 replayed from one CUDA graph (cudal1.CudaGraph), convs in true fp32, each
fire module's ReLUs and concatenation written straight into its output.

At batch 1 the whole network is ~1.6 GFLOP (the 7x7 stem 0.34, the final 1x1 classifier conv 0.17,
eight fires the rest) spread over ~90 launches: the stem conv, its bias add, ReLU and three ceil-mode
maxpools; per fire a squeeze conv, its bias add and ReLU, two expand convs with their bias adds, two
ReLUs and torch.cat (~10); the classifier's conv, bias add, ReLU and average pool. Each is a few
microseconds of GPU work (the largest activation is (1, 96, 109, 109), 4.6 MB) and several of host
time in eager, so eager is launch-bound. The graph replays all of it with one launch; copying the
0.6 MB input in and cloning the (1, 1000) output cost next to nothing.

Inside each fire, the expand ReLUs are torch.clamp_min(e, 0, out=y[:, slice]) into the concatenated
output: one launch fewer per fire and no extra pass over the activation; bit for bit the reference's
result. Dropout(p=0.0) is the identity (ATen returns its input).

TF32: eager's default TF32 convs are 5x outside the strict tolerance; at these sizes the convs are
latency-bound, so doing them in fp32 costs little.
Measured on the H200: 4.53x vs eager (2.41 ms -> 0.532 ms): eager's ~90 host-issued launches, not
the GPU, are its call, and its time spreads by 0.27 ms between rounds (interquartile range)
against the graph's 0.01 ms.
"""
import torch
import torch.nn as nn

import cudal1


class FireModule(nn.Module):
    def __init__(self, in_channels, squeeze_channels, expand1x1_channels, expand3x3_channels):
        super().__init__()
        self.squeeze = nn.Conv2d(in_channels, squeeze_channels, kernel_size=1)
        self.squeeze_activation = nn.ReLU(inplace=True)
        self.expand1x1 = nn.Conv2d(squeeze_channels, expand1x1_channels, kernel_size=1)
        self.expand1x1_activation = nn.ReLU(inplace=True)
        self.expand3x3 = nn.Conv2d(squeeze_channels, expand3x3_channels, kernel_size=3, padding=1)
        self.expand3x3_activation = nn.ReLU(inplace=True)

    def forward(self, x):
        s = self.squeeze_activation(self.squeeze(x))
        e1, e3 = self.expand1x1(s), self.expand3x3(s)  # (B, E1, H, W), (B, E3, H, W)
        n, c1, h, w = e1.shape
        y = e1.new_empty(n, c1 + e3.shape[1], h, w)
        torch.clamp_min(e1, 0, out=y[:, :c1])  # ReLU and concatenation in one pass each
        torch.clamp_min(e3, 0, out=y[:, c1:])
        return y


class ModelNew(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 96, kernel_size=7, stride=2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
            FireModule(96, 16, 64, 64),
            FireModule(128, 16, 64, 64),
            FireModule(128, 32, 128, 128),
            nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
            FireModule(256, 32, 128, 128),
            FireModule(256, 48, 192, 192),
            FireModule(384, 48, 192, 192),
            FireModule(384, 64, 256, 256),
            nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
            FireModule(512, 64, 256, 256),
        )
        self.classifier = nn.Sequential(
            nn.Dropout(p=0.0),
            nn.Conv2d(512, num_classes, kernel_size=1),
            nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d((1, 1)),
        )
        self.graph = cudal1.CudaGraph(self._forward)  # captured at the first CUDA call

    def _forward(self, x):
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # true fp32 convs, as the check requires (set at capture)
        try:
            x = self.features(x)  # (B, 512, 13, 13) at 224
            x = self.classifier(x)  # (B, num_classes, 1, 1)
            return torch.flatten(x, 1)
        finally:
            torch.backends.cudnn.allow_tf32 = tf32

    def forward(self, x):
        return self.graph(x)
