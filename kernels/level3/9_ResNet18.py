"""ResNet-18 at batch 2 replayed from one CUDA graph: ~70 small ops, launch-bound, convs in strict fp32.

The network at (2, 3, 224, 224): 20 convs (stem 7x7, sixteen 3x3 in eight basic blocks, three 1x1
shortcut convs; 3.6 G multiply-adds, 7.3 GFLOP), 20 training-mode BatchNorms, 17 ReLUs, 8
residual adds, a maxpool, a global average pool and a Linear(512->1000): ~70 ops and ~90 kernels
(each BN is a cuDNN batch-norm kernel plus its num_batches_tracked += 1). With two images most of
these kernels run for a few microseconds (layer4 is 2 x 512 x 7 x 7), while each op costs an
nn.Module call, a dispatch and a launch on the host, cuDNN's convs among the dearer ones: eagerly
the host path is most of the call. cudal1.CudaGraph records the forward at the first call; later
calls are a copy of the 1.2 MB input, one graph launch and a clone of the (2, 1000) output.

Training-mode BatchNorm is safe to replay: it normalises with the batch statistics computed inside
the graph, from each replay's own data, and updates running_mean, running_var and
num_batches_tracked in place, where they live (the graph reads and writes the module's own
buffers). The warm-up calls of the first capture update them twice more than eager would; no
output depends on them in training mode.

The precision race: eager's default TF32 convs are 18x outside the strict tolerance, so forward
turns cudnn.allow_tf32 off around the graph call (cuDNN picks its kernels at the first call's
warm-up and capture, so the graph replays fp32 convs), while the eager reference is timed with
TF32 tensor cores. Measured on the H200: 1.32x vs eager (1.79 ms -> 1.36 ms), a win but a modest
one: the replayed graph still takes 1.36 ms, far above the 0.11 ms that 7.3 GFLOP needs at the
H200's 67 TFLOP/s fp32 peak (datasheet), so with the launches gone the strict forward's own GPU
time, convs and BatchNorms on two images that fill little of the GPU, sets the call.
"""
import torch
import torch.nn as nn

import cudal1


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, in_channels, out_channels, stride=1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(out_channels, out_channels, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:  # fixed at construction: the same branch on every call
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class ModelNew(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        self.in_channels = 64
        self.conv1 = nn.Conv2d(3, 64, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(BasicBlock, 64, 2, stride=1)
        self.layer2 = self._make_layer(BasicBlock, 128, 2, stride=2)
        self.layer3 = self._make_layer(BasicBlock, 256, 2, stride=2)
        self.layer4 = self._make_layer(BasicBlock, 512, 2, stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * BasicBlock.expansion, num_classes)
        self.graph = cudal1.CudaGraph(self.body)  # captured at the first CUDA call (the CPU runs body as is)

    def _make_layer(self, block, out_channels, blocks, stride=1):
        downsample = None
        if stride != 1 or self.in_channels != out_channels * block.expansion:
            downsample = nn.Sequential(  # built before the block, as in the task (names match either way)
                nn.Conv2d(self.in_channels, out_channels * block.expansion, kernel_size=1, stride=stride, bias=False),
                nn.BatchNorm2d(out_channels * block.expansion),
            )
        layers = [block(self.in_channels, out_channels, stride, downsample)]
        self.in_channels = out_channels * block.expansion
        for _ in range(1, blocks):
            layers.append(block(self.in_channels, out_channels))
        return nn.Sequential(*layers)

    def body(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))  # (B, 64, H/4, W/4)
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))  # (B, 512, H/32, W/32)
        x = torch.flatten(self.avgpool(x), 1)
        return self.fc(x)  # (B, 1000)

    def forward(self, x):
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # strict fp32 convs, fixed into the graph when it is captured
        try:
            return self.graph(x)
        finally:
            torch.backends.cudnn.allow_tf32 = tf32
