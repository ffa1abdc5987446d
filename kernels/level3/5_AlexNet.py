"""AlexNet replayed from one CUDA graph, with strict fp32 convs: slower than eager's TF32 convs.

The forward at batch 10: five convs (10.8 G multiply-adds: conv1 11x11/4 1.1G, conv2 5x5 4.5G,
conv3-5 3x3 5.2G), three maxpools, seven ReLUs and three Linears whose weights are 58.6M floats
(234 MB, ~49 us of HBM reads at 4.8 TB/s, a GEMM with M = 10 that is all weight traffic). Eagerly
that is ~20 ops and about 25 kernels (PyTorch adds a conv's bias in a kernel after cuDNN returns);
the Dropout(p=0.0) layers are the identity even in training mode and are simply not called.
cudal1.CudaGraph records the kernels at the first call; later calls are a copy of the 6 MB input,
one graph launch and a clone of the (10, 1000) output, so no host time sits between kernels.

The precision race decides this task, not the launches. Eager's default TF32 convs are 5.5x outside
the strict tolerance, so forward turns cudnn.allow_tf32 off around the graph call (cuDNN picks its
kernels during the first call's warm-up and capture, so the graph replays fp32 convs), while the
eager reference is timed with cuDNN's TF32 tensor cores. 21.5 GFLOP of convs would take 0.32 ms at
the H200's 67 TFLOP/s fp32 peak and 0.04 ms at its 495 TFLOP/s dense TF32 peak (datasheet
figures); the strict graph call takes 1.40 ms, so cuDNN's fp32 kernels run far below peak on these
shapes, and no saving of host time covers that. The Linears are fp32 on both sides (matmul TF32 is
off by default), the same cost. The result is Model.forward's, op for op.

Measured on the H200: 0.51x vs eager (0.717 ms -> 1.40 ms), slower. Winning would take convs that
are exact to fp32 yet run on tensor cores (e.g. 3xTF32 splitting in an implicit GEMM), which
cuDNN's fp32 path does not offer.
"""
import torch
import torch.nn as nn

import cudal1


class ModelNew(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 96, kernel_size=11, stride=4, padding=2)
        self.relu1 = nn.ReLU(inplace=True)
        self.maxpool1 = nn.MaxPool2d(kernel_size=3, stride=2)
        self.conv2 = nn.Conv2d(96, 256, kernel_size=5, padding=2)
        self.relu2 = nn.ReLU(inplace=True)
        self.maxpool2 = nn.MaxPool2d(kernel_size=3, stride=2)
        self.conv3 = nn.Conv2d(256, 384, kernel_size=3, padding=1)
        self.relu3 = nn.ReLU(inplace=True)
        self.conv4 = nn.Conv2d(384, 384, kernel_size=3, padding=1)
        self.relu4 = nn.ReLU(inplace=True)
        self.conv5 = nn.Conv2d(384, 256, kernel_size=3, padding=1)
        self.relu5 = nn.ReLU(inplace=True)
        self.maxpool3 = nn.MaxPool2d(kernel_size=3, stride=2)
        self.fc1 = nn.Linear(256 * 6 * 6, 4096)
        self.relu6 = nn.ReLU(inplace=True)
        self.dropout1 = nn.Dropout(p=0.0)  # kept for the module layout; never called
        self.fc2 = nn.Linear(4096, 4096)
        self.relu7 = nn.ReLU(inplace=True)
        self.dropout2 = nn.Dropout(p=0.0)
        self.fc3 = nn.Linear(4096, num_classes)
        self.graph = cudal1.CudaGraph(self.body)  # captured at the first CUDA call (the CPU runs body as is)

    def body(self, x):
        x = self.maxpool1(self.relu1(self.conv1(x)))  # (B, 96, 27, 27)
        x = self.maxpool2(self.relu2(self.conv2(x)))  # (B, 256, 13, 13)
        x = self.relu3(self.conv3(x))
        x = self.relu4(self.conv4(x))
        x = self.maxpool3(self.relu5(self.conv5(x)))  # (B, 256, 6, 6)
        x = torch.flatten(x, 1)  # (B, 9216)
        x = self.relu6(self.fc1(x))  # dropout(p=0.0) is the identity: skipped
        x = self.relu7(self.fc2(x))
        return self.fc3(x)  # (B, 1000)

    def forward(self, x):
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # strict fp32 convs, fixed into the graph when it is captured
        try:
            return self.graph(x)
        finally:
            torch.backends.cudnn.allow_tf32 = tf32
