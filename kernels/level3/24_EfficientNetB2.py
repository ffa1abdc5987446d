"""EfficientNet-B2 (the task's version, whose "squeeze-excitation" collapses the map to 1x1) at
batch 2 replayed from one CUDA graph (cudal1.CudaGraph), convs in true fp32: the reference's forward,
op for op, launched once.

The forward is ~90 launches: the stem (conv, BN with its num_batches_tracked add, ReLU), five blocks
of ~16 (1x1 expand conv, BN, ReLU, 3x3 depthwise conv, BN, ReLU, average pool to 1x1, two 1x1 convs
with a ReLU and a Sigmoid, the 1x1 project conv and its BN), then the head (1x1 conv to 1408, BN,
ReLU, pool, Linear). Only the stem and the first half of block 1 see a real map (2 x 96 x 112 x 112,
9.6 MB); once its pool has run every tensor is (2, C, 1, 1) with C <= 1728, each conv a tiny
matrix-vector product, each BN a reduction over 2 values. The whole call is ~0.27 GFLOP: a few
microseconds of GPU work per op against several of host time per launch in eager, so eager is
launch-bound end to end. The graph replays all ~90 launches with one; copying the 1.2 MB input in and
cloning the (2, 1000) output cost next to nothing. BatchNorm keeps training-mode semantics inside the
graph: batch statistics (2 values per channel on the 1x1 maps), and the running statistics updated
in place at each replay.

TF32: eager's default TF32 convs are about 19,000x outside the strict tolerance here (most likely
because each BatchNorm over 2 values maps them to about +-1, so rounding can flip an output),
while at these sizes the convs are latency-bound, so fp32 costs almost nothing.
Measured on the H200: 4.21x vs eager (3.80 ms -> 0.903 ms).
"""
import torch
import torch.nn as nn

import cudal1


class ModelNew(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, kernel_size=3, stride=2, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(32)
        self.relu = nn.ReLU(inplace=True)
        self.mbconv1 = self._make_mbconv_block(32, 96, 1, 3)
        self.mbconv2 = self._make_mbconv_block(96, 144, 2, 6)
        self.mbconv3 = self._make_mbconv_block(144, 192, 2, 6)
        self.mbconv4 = self._make_mbconv_block(192, 288, 2, 6)
        self.mbconv5 = self._make_mbconv_block(288, 384, 1, 6)
        self.conv_final = nn.Conv2d(384, 1408, kernel_size=1, stride=1, padding=0, bias=False)
        self.bn_final = nn.BatchNorm2d(1408)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(1408, num_classes)
        self.graph = cudal1.CudaGraph(self._forward)  # captured at the first CUDA call

    def _make_mbconv_block(self, in_channels, out_channels, stride, expand_ratio):
        layers = []
        expanded = in_channels * expand_ratio
        if expand_ratio != 1:
            layers += [
                nn.Conv2d(in_channels, expanded, kernel_size=1, stride=1, padding=0, bias=False),
                nn.BatchNorm2d(expanded),
                nn.ReLU(inplace=True),
            ]
        layers += [
            nn.Conv2d(expanded, expanded, kernel_size=3, stride=stride, padding=1, groups=expanded, bias=False),
            nn.BatchNorm2d(expanded),
            nn.ReLU(inplace=True),
        ]
        layers += [  # the task's "squeeze-excitation", in sequence and never multiplied back
            nn.AdaptiveAvgPool2d((1, 1)),
            nn.Conv2d(expanded, expanded // 4, kernel_size=1, stride=1, padding=0, bias=False),
            nn.ReLU(inplace=True),
            nn.Conv2d(expanded // 4, expanded, kernel_size=1, stride=1, padding=0, bias=False),
            nn.Sigmoid(),
        ]
        layers += [
            nn.Conv2d(expanded, out_channels, kernel_size=1, stride=1, padding=0, bias=False),
            nn.BatchNorm2d(out_channels),
        ]
        return nn.Sequential(*layers)

    def _forward(self, x):
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # true fp32 convs, as the check requires (set at capture)
        try:
            x = self.relu(self.bn1(self.conv1(x)))  # (B, 32, 112, 112)
            x = self.mbconv1(x)  # (B, 96, 1, 1): the pool collapsed the map
            x = self.mbconv2(x)
            x = self.mbconv3(x)
            x = self.mbconv4(x)
            x = self.mbconv5(x)  # (B, 384, 1, 1)
            x = self.relu(self.bn_final(self.conv_final(x)))
            x = self.avgpool(x)
            return self.fc(torch.flatten(x, 1))
        finally:
            torch.backends.cudnn.allow_tf32 = tf32

    def forward(self, x):
        return self.graph(x)
