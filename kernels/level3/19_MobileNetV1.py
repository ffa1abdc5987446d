"""MobileNet v1 replayed from one CUDA graph (cudal1.CudaGraph), convs in true fp32: the reference's
forward, op for op, launched once.

At batch 10 the forward is 27 convs (the stem, 13 depthwise 3x3 and 13 pointwise 1x1), each followed
by a training-mode BatchNorm (cuDNN kernel plus the num_batches_tracked add) and an in-place ReLU,
then the 7x7 average pool and the Linear: ~110 launches. The GPU work is modest: 11.4 GFLOP, ~95% of
it in the pointwise convs, and ~220 MB of conv outputs, each touched about seven times (conv write,
BN statistics and apply, ReLU, next conv's read), ~1.5 GB or ~0.3 ms at H200 bandwidth; the largest
activation is (10, 64, 112, 112), 32 MB. Eager pays host time (Python, dispatch, launch) for every one
of the ~110 launches and the small late layers (14 x 14 and 7 x 7) finish faster than the host can
queue them, so the GPU idles. The graph replays the whole sequence with one launch; copying the 6 MB
input in and cloning the (10, 1000) output are negligible. BatchNorm keeps training-mode semantics
inside the graph: batch statistics, and the running statistics updated in place at each replay.

TF32: the depthwise convs never use tensor cores, TF32 or not; the pointwise 1x1 convs do in eager,
and eager's default TF32 is 268x outside the strict tolerance here, so they run in fp32 (~67 TFLOP/s
peak). Measured on the H200: 1.65x vs eager (2.26 ms -> 1.36 ms). The replayed graph's 1.36 ms is
several times the ~0.3 ms of traffic and ~0.16 ms of fp32 pointwise math at peak, so with the
launches gone the strict forward's own GPU time, many small kernels well below bandwidth, sets the
call; eager's time spreads by 0.21 ms between rounds (interquartile range), the graph's by 0.02 ms.
"""
import torch
import torch.nn as nn

import cudal1


class ModelNew(nn.Module):
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
        self.graph = cudal1.CudaGraph(self._forward)  # captured at the first CUDA call

    def _forward(self, x):
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # true fp32 convs, as the check requires (set at capture)
        try:
            x = self.model(x)  # (B, 1024 * alpha, 1, 1)
            return self.fc(x.view(x.size(0), -1))
        finally:
            torch.backends.cudnn.allow_tf32 = tf32

    def forward(self, x):
        return self.graph(x)
