"""GoogLeNet (Inception v1) replayed from one CUDA graph, convs in strict fp32.

At batch 10 and 224x224 the network is 57 convs (15.8 G multiply-adds, 31.6 GFLOP), 13 maxpools,
three ReLUs, nine channel concatenations, a global average pool and a Linear(1024->1000); the
dropout has p=0.0 and is not called. Eagerly that is ~85 ops and ~140 kernels (PyTorch adds each
conv's bias in a kernel of its own after cuDNN returns), most of them on small maps (28x28 down to
7x7, a few microseconds of GPU work each), and every op is an operator dispatch and a launch on the
host: the host path is the larger part of the eager call. cudal1.CudaGraph records the whole
forward at the first call; later calls are a copy of the 6 MB input, one graph launch and a clone
of the (10, 1000) output, so the kernels run back to back with no host in between. The ops are
Model.forward's, so is the result.

Not done here: merging each module's three 1x1 convs of the same input into one conv (as the
single-module task 6 does, where it saves passes over a 963 MB input). At these map sizes the
inputs sit in L2, and inside a graph the merge trades two conv launches for two weight
concatenations and two copies of channel slices (cuDNN wants contiguous inputs), so its gain is
only a wider GEMM in place of thin ones (480->16): not clear enough to take unmeasured.

The precision race: eager's default TF32 convs are 2.2x outside the strict tolerance, so forward
turns cudnn.allow_tf32 off around the graph call (cuDNN picks its kernels during the first call's
warm-up and capture, so the graph replays fp32 convs), while the eager reference is timed with
TF32 tensor cores. 31.6 GFLOP take 0.47 ms at the H200's 67 TFLOP/s fp32 peak and 0.06 ms at its
495 TFLOP/s dense TF32 peak (datasheet figures), small beside eager's host time for ~85 dispatches
and ~140 launches. Measured on the H200: 1.55x vs eager (4.95 ms -> 3.19 ms). Eager's time also
spreads by 1.4 ms between rounds (interquartile range) against the graph's 0.03 ms, the mark of a
host-bound eager call; the fp32 convs set the graph's 3.19 ms and so the margin.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1


class InceptionModule(nn.Module):
    def __init__(self, in_channels, out_1x1, reduce_3x3, out_3x3, reduce_5x5, out_5x5, pool_proj):
        super().__init__()
        self.branch1x1 = nn.Conv2d(in_channels, out_1x1, kernel_size=1)
        self.branch3x3 = nn.Sequential(
            nn.Conv2d(in_channels, reduce_3x3, kernel_size=1),
            nn.Conv2d(reduce_3x3, out_3x3, kernel_size=3, padding=1),
        )
        self.branch5x5 = nn.Sequential(
            nn.Conv2d(in_channels, reduce_5x5, kernel_size=1),
            nn.Conv2d(reduce_5x5, out_5x5, kernel_size=5, padding=2),
        )
        self.branch_pool = nn.Sequential(
            nn.MaxPool2d(kernel_size=3, stride=1, padding=1),
            nn.Conv2d(in_channels, pool_proj, kernel_size=1),
        )

    def forward(self, x):
        return torch.cat([self.branch1x1(x), self.branch3x3(x), self.branch5x5(x), self.branch_pool(x)], dim=1)


class ModelNew(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, kernel_size=7, stride=2, padding=3)
        self.maxpool1 = nn.MaxPool2d(3, stride=2, padding=1)
        self.conv2 = nn.Conv2d(64, 64, kernel_size=1)
        self.conv3 = nn.Conv2d(64, 192, kernel_size=3, padding=1)
        self.maxpool2 = nn.MaxPool2d(3, stride=2, padding=1)
        self.inception3a = InceptionModule(192, 64, 96, 128, 16, 32, 32)
        self.inception3b = InceptionModule(256, 128, 128, 192, 32, 96, 64)
        self.maxpool3 = nn.MaxPool2d(3, stride=2, padding=1)
        self.inception4a = InceptionModule(480, 192, 96, 208, 16, 48, 64)
        self.inception4b = InceptionModule(512, 160, 112, 224, 24, 64, 64)
        self.inception4c = InceptionModule(512, 128, 128, 256, 24, 64, 64)
        self.inception4d = InceptionModule(512, 112, 144, 288, 32, 64, 64)
        self.inception4e = InceptionModule(528, 256, 160, 320, 32, 128, 128)
        self.maxpool4 = nn.MaxPool2d(3, stride=2, padding=1)
        self.inception5a = InceptionModule(832, 256, 160, 320, 32, 128, 128)
        self.inception5b = InceptionModule(832, 384, 192, 384, 48, 128, 128)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.dropout = nn.Dropout(0.0)  # kept for the module layout; never called
        self.fc = nn.Linear(1024, num_classes)
        self.graph = cudal1.CudaGraph(self.body)  # captured at the first CUDA call (the CPU runs body as is)

    def body(self, x):
        x = self.maxpool1(F.relu(self.conv1(x)))  # (B, 64, H/4, W/4)
        x = F.relu(self.conv2(x))
        x = self.maxpool2(F.relu(self.conv3(x)))  # (B, 192, H/8, W/8)
        x = self.inception3b(self.inception3a(x))  # 480 channels
        x = self.maxpool3(x)
        for m in (self.inception4a, self.inception4b, self.inception4c, self.inception4d, self.inception4e):
            x = m(x)  # 512, 512, 512, 528, 832 channels
        x = self.maxpool4(x)
        x = self.inception5b(self.inception5a(x))  # (B, 1024, H/32, W/32)
        x = torch.flatten(self.avgpool(x), 1)  # dropout(p=0.0) is the identity: skipped
        return self.fc(x)  # (B, 1000)

    def forward(self, x):
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # strict fp32 convs, fixed into the graph when it is captured
        try:
            return self.graph(x)
        finally:
            torch.backends.cudnn.allow_tf32 = tf32
