"""LeNet-5 replayed from one CUDA graph: eleven ops on a 1x32x32 image, every one of them a launch.

conv1 (1->6, 5x5) + ReLU + 2x2 maxpool, conv2 (6->16, 5x5) + ReLU + maxpool, then Linear(400->120)
+ ReLU, Linear(120->84) + ReLU, Linear(84->10), on a batch of one. The convs are 358K
multiply-adds, the Linears 59K, the weights 62K floats (247 KB): microseconds of GPU work at most.
Eagerly the forward is 11 ops and about 13 kernels (PyTorch adds a conv's bias in a kernel of its
own after cuDNN returns), each an operator dispatch and a launch issued after the last, and that
host path is the whole call. cudal1.CudaGraph records those kernels at the first call; then a call
is a copy of x into the graph's input, one graph launch and a clone of the (1, 10) output. The
graph runs the same ops as Model.forward (view(-1, 400) and all), so the result is the eager one.
Measured on the H200: 3.16x vs eager (0.523 ms -> 0.166 ms).

Precision: the check wants strict fp32, so forward turns cudnn.allow_tf32 off around the graph
call; the flag is read when cuDNN picks its kernels, at the warm-up and capture of the first call,
so the graph replays fp32 convs whatever the flag is later. On this task that changes nothing:
eager under PyTorch's default flags matched the strict reference exactly (error 0 in tolerance
units), so cuDNN evidently runs these 1- and 6-channel convs without TF32 anyway. Eager already
meets the strict tolerance here, and the win is the launches alone.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1


class ModelNew(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, kernel_size=5, stride=1)
        self.conv2 = nn.Conv2d(6, 16, kernel_size=5, stride=1)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, num_classes)
        self.graph = cudal1.CudaGraph(self.body)  # captured at the first CUDA call (the CPU runs body as is)

    def body(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), kernel_size=2, stride=2)  # (B, 6, 14, 14)
        x = F.max_pool2d(F.relu(self.conv2(x)), kernel_size=2, stride=2)  # (B, 16, 5, 5)
        x = x.view(-1, 16 * 5 * 5)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)  # (B, 10)

    def forward(self, x):
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # strict fp32 convs, fixed into the graph when it is captured
        try:
            return self.graph(x)
        finally:
            torch.backends.cudnn.allow_tf32 = tf32
