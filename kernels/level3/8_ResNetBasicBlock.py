"""A ResNet basic block at 224x224 in strict fp32, eagerly: no CUDA graph, and slower than eager's
TF32 convs.

At batch 10, 3 -> 64 channels and 224x224: conv1 (3x3, 3->64, 0.9 G multiply-adds), conv2 (3x3,
64->64, 18.5 G) and the 1x1 shortcut conv (3->64, 0.1 G), three training-mode BatchNorms, the
residual add and two ReLUs: 19.5 G multiply-adds (38.9 GFLOP), and every activation is
(10, 64, 224, 224), 128 MB. Eagerly that is about 12 kernels (cuDNN conv, cuDNN batch-norm
training, each BN's num_batches_tracked += 1, the add, the ReLUs), each working on 128 MB tensors
for tens of microseconds or more: the host issues them far faster than the GPU runs them, so there
is no launch gap to remove. A CUDA graph would only add its input copy and a clone of the 128 MB
output (~55 us of HBM traffic at 4.8 TB/s), so this forward is Model.forward as it is. Nothing can
be folded: in training mode each BN normalises with its batch's statistics, known only after its
conv has run, and it updates its running statistics, so the BN modules are called as they are.

What decides the ratio is precision. Eager's default TF32 convs are 19x outside the strict
tolerance, so forward turns cudnn.allow_tf32 off around the block, while the eager reference is
timed under PyTorch's defaults, where cuDNN uses TF32 tensor cores. 38.9 GFLOP is 0.58 ms at the
H200's 67 TFLOP/s fp32 peak and 0.08 ms at its 495 TFLOP/s dense TF32 peak (datasheet figures);
the BatchNorms and elementwise ops (~15 passes over 128 MB, ~0.4 ms) cost the same on both sides.
Measured on the H200: 0.71x vs eager (1.58 ms -> 2.22 ms), slower by 0.65 ms, the price of fp32
over TF32 in the convs. Winning would take convs exact to fp32 that still use tensor cores (3xTF32
splitting as an implicit GEMM), which cuDNN's fp32 path does not offer.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    expansion = 1

    def __init__(self, in_channels, out_channels, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(out_channels, out_channels, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.downsample = nn.Sequential(
            nn.Conv2d(in_channels, out_channels * self.expansion, kernel_size=1, stride=stride, bias=False),
            nn.BatchNorm2d(out_channels * self.expansion),
        )
        self.stride = stride

    def forward(self, x):
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # true fp32 convs, as the check requires
        try:
            out = self.relu(self.bn1(self.conv1(x)))  # (B, 64, 224, 224)
            out = self.bn2(self.conv2(out))
            out += self.downsample(x)  # in place on an intermediate, never on x
            return self.relu(out)
        finally:
            torch.backends.cudnn.allow_tf32 = tf32
