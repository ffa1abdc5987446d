"""DenseNet-121 replayed from one CUDA graph (cudal1.CudaGraph), convs in true fp32, with each
transition's average pool moved in front of its 1x1 conv.

At batch 10 this network is a long chain of small ops: 58 dense layers of BatchNorm (cuDNN kernel plus
the num_batches_tracked add), ReLU, 3x3 conv and re-concatenation (~5 launches each, ~290), three
transitions (~15), the stem (conv, BN, ReLU, maxpool) and the head (BN, ReLU, pool, Linear): ~320
launches per forward, each paying Python, dispatch and launch cost on the host in eager. Past block 0
the tensors are small (block 2 runs at 14 x 14, one channel of the batch is 8 KB), so the GPU waits
on the host most of the call. The graph records the whole forward once and replays it with one
launch; the input (6 MB) is copied into the graph's buffer and the (10, 10) output cloned, both
negligible. BatchNorm keeps training-mode semantics inside the graph: batch statistics, and the
running statistics updated in place at each replay.

The transitions use the exact identity avgpool2x2(conv1x1(z)) = conv1x1(avgpool2x2(z)) (both linear,
no bias): a quarter of their conv work and no full-resolution conv output; the reordered sums
differ from the reference by rounding only (0.02 of the tolerance, measured).

TF32: eager's default TF32 convs are 7.5x outside the strict tolerance, so the convs, ~56 GFLOP
(blocks 15.6, 16.5, 16.9 and 3.4 GFLOP, stem 2.4, transitions 1.5 after pooling first), run here
in fp32, 0.84 ms even at the H200's ~67 TFLOP/s peak.
Measured on the H200: 1.92x vs eager (13.0 ms -> 6.79 ms). The graph's 6.79 ms is the strict
forward's GPU time: hundreds of small BN, ReLU, conv and concatenation kernels that fill little of
the GPU. Eager's 13.0 ms, spreading by 3.2 ms between rounds (interquartile range) against the
graph's 0.04 ms, is host-bound.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1


class DenseBlock(nn.Module):
    def __init__(self, num_layers, num_input_features, growth_rate):
        super().__init__()
        layers = []
        for i in range(num_layers):
            layers.append(self._make_layer(num_input_features + i * growth_rate, growth_rate))
        self.layers = nn.ModuleList(layers)

    def _make_layer(self, in_features, growth_rate):
        return nn.Sequential(
            nn.BatchNorm2d(in_features),
            nn.ReLU(inplace=True),
            nn.Conv2d(in_features, growth_rate, kernel_size=3, padding=1, bias=False),
            nn.Dropout(0.0),
        )

    def forward(self, x):
        features = [x]
        for bn, relu, conv, _ in self.layers:  # _ is Dropout(0.0): the identity
            features.append(conv(relu(bn(x))))
            x = torch.cat(features, 1)
        return x


class TransitionLayer(nn.Module):
    def __init__(self, num_input_features, num_output_features):
        super().__init__()
        self.transition = nn.Sequential(
            nn.BatchNorm2d(num_input_features),
            nn.ReLU(inplace=True),
            nn.Conv2d(num_input_features, num_output_features, kernel_size=1, bias=False),
            nn.AvgPool2d(kernel_size=2, stride=2),
        )

    def forward(self, x):
        bn, relu, conv, pool = self.transition
        return conv(pool(relu(bn(x))))  # pool first: the 1x1 conv and the average commute


class ModelNew(nn.Module):
    def __init__(self, growth_rate=32, num_classes=1000):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, kernel_size=7, stride=2, padding=3, bias=False),
            nn.BatchNorm2d(64),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2, padding=1),
        )
        num_features = 64
        block_layers = [6, 12, 24, 16]
        self.dense_blocks = nn.ModuleList()
        self.transition_layers = nn.ModuleList()
        for i, num_layers in enumerate(block_layers):  # interleaved, as the reference creates them
            self.dense_blocks.append(DenseBlock(num_layers, num_features, growth_rate))
            num_features = num_features + num_layers * growth_rate
            if i != len(block_layers) - 1:
                self.transition_layers.append(TransitionLayer(num_features, num_features // 2))
                num_features = num_features // 2
        self.final_bn = nn.BatchNorm2d(num_features)
        self.classifier = nn.Linear(num_features, num_classes)
        self.graph = cudal1.CudaGraph(self._forward)  # captured at the first CUDA call

    def _forward(self, x):
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # true fp32 convs, as the check requires (set at capture)
        try:
            x = self.features(x)  # (B, 64, H/4, W/4)
            for i, block in enumerate(self.dense_blocks):
                x = block(x)
                if i != len(self.dense_blocks) - 1:
                    x = self.transition_layers[i](x)
            x = F.relu(self.final_bn(x), inplace=True)
            x = F.adaptive_avg_pool2d(x, (1, 1)).view(x.size(0), -1)  # (B, 1024)
            return self.classifier(x)
        finally:
            torch.backends.cudnn.allow_tf32 = tf32

    def forward(self, x):
        return self.graph(x)
