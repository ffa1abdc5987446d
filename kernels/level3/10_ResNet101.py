"""ResNet-101 at batch 10 replayed from one CUDA graph: ~345 ops, convs in strict fp32.

The network at (10, 3, 224, 224): 104 convs (the 7x7 stem, 33 bottleneck blocks of 1x1, 3x3 and
1x1 convs, four 1x1 shortcut convs; 78 G multiply-adds, 156 GFLOP), 104 training-mode
BatchNorms, 100 ReLUs, 33 residual adds, two pools and a Linear(2048->1000): ~345 ops and ~450
kernels (each BN is a cuDNN batch-norm kernel plus its num_batches_tracked += 1). Most of the
blocks work on small maps (layer3's 23 blocks are 10 x 256..1024 x 14 x 14), and every op is an
nn.Module call, a dispatch and a launch on the host, cuDNN's convs among the dearer ones: eagerly
the host path is longer than the GPU's work. cudal1.CudaGraph records the forward at the first
call; later calls are a copy of the 6 MB input, one graph launch and a clone of the (10, 1000)
output, and the ~450 kernels run back to back.

Training-mode BatchNorm is safe to replay: it normalises with the batch statistics computed inside
the graph from each replay's data and updates running_mean, running_var and num_batches_tracked
in place in the modules' own buffers. The first call's two warm-up runs update them twice more than
eager would; no output depends on them in training mode.

The precision race: eager's default TF32 convs are 2700x outside the strict tolerance here (the
rounding most likely compounds through 104 convs and BatchNorms), so forward turns
cudnn.allow_tf32 off around the graph call (cuDNN picks its kernels at the first call's warm-up and
capture, so the graph replays fp32 convs), while the eager reference is timed with TF32 tensor
cores. 156 GFLOP is 2.3 ms at the H200's 67 TFLOP/s fp32 peak and 0.32 ms at its 495 TFLOP/s dense
TF32 peak (datasheet figures). Measured on the H200: 1.66x vs eager (15.3 ms -> 9.18 ms): eager's
host time for ~345 ops is longer than the whole strict fp32 forward, and its time spreads by 3.1 ms
between rounds (interquartile range) against the graph's 0.03 ms, the mark of a host-bound call.
"""
import torch
import torch.nn as nn

import cudal1


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, in_channels, out_channels, stride=1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, kernel_size=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.conv3 = nn.Conv2d(out_channels, out_channels * self.expansion, kernel_size=1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_channels * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        if self.downsample is not None:  # fixed at construction: the same branch on every call
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class ModelNew(nn.Module):
    def __init__(self, layers, num_classes=1000):
        super().__init__()
        self.in_channels = 64
        self.conv1 = nn.Conv2d(3, 64, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(Bottleneck, 64, layers[0], stride=1)
        self.layer2 = self._make_layer(Bottleneck, 128, layers[1], stride=2)
        self.layer3 = self._make_layer(Bottleneck, 256, layers[2], stride=2)
        self.layer4 = self._make_layer(Bottleneck, 512, layers[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * Bottleneck.expansion, num_classes)
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
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))  # (B, 2048, H/32, W/32)
        x = torch.flatten(self.avgpool(x), 1)
        return self.fc(x)  # (B, 1000)

    def forward(self, x):
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # strict fp32 convs, fixed into the graph when it is captured
        try:
            return self.graph(x)
        finally:
            torch.backends.cudnn.allow_tf32 = tf32
