"""The "RegNet" conv stack replayed from one CUDA graph, every 3x3 conv as TF32 + bf16.

Three stages of conv3x3+BN+ReLU, conv3x3+BN+ReLU, maxpool at 224, 112 and 56 pixels (64, 128 and 256
channels, batch 8), then a mean and a Linear: only ~35 aten ops, but ~120 GFLOP, 30 of them in each
of the three widest convs. The time is the convolutions, and the race is TF32: eager lets cuDNN run
them on TF32 tensor cores (~1e-3 relative error; eager's default math misses the strict tolerance
here by a factor of 1.8), while exact fp32 on the CUDA cores would take several times as long. So
each conv runs as TF32 + bf16 (cudal1.conv_tf32_bf16): the input is split as x = hi + lo, hi exact in
TF32 (the low 13 mantissa bits cleared), the weight likewise; hi*hi runs as a TF32 convolution,
whose products of two TF32 numbers are exact and whose sums are fp32, and the two cross terms
hi*lo + lo*hi, ~2^-11 of the result, as ONE bf16 convolution of [hi_x, lo_x] (2x the input
channels) against [lo_w, hi_w], where bf16's 8-bit mantissa costs ~2^-19 of the result; lo*lo
(~2^-22) is dropped. That is about two TF32 convolutions' work (bf16 runs at twice TF32's rate)
where 3xTF32, the same products as one TF32 convolution over 3x the channels, is three.

With 3xTF32 this file measured 0.57x vs eager on the H200 (2.23 ms -> 3.91 ms), ~1.75x eager's
time for three times its tensor-core work, as eager runs its 120 GFLOP at ~54 TFLOP/s, far from
the TF32 peak. This version is not yet measured. Winning outright needs fp32 accuracy at near-TF32
cost: the split done in registers inside one implicit-GEMM kernel, with BN statistics and ReLU in
its epilogue, so the wide split input never goes to memory.

cudal1.CudaGraph replays the forward as one launch, which matters little here (35 ops against
milliseconds of convolution) but costs only the input copy and the output clone. BatchNorm stays in
training mode (batch statistics, running statistics updated at every replay), so conv+BN cannot be
folded; the conv bias is kept although the batch mean cancels it, because the running mean must
still see it. The capture's two warm-up runs would update the running statistics two extra times, so
the first call of each input shape saves every buffer, captures, restores them and then replays.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1


def conv_fp32(c, x):
    """c(x) for a groups=1 Conv2d at fp32 accuracy on TF32 and bf16 tensor cores (cudal1.conv_tf32_bf16)."""
    return cudal1.conv_tf32_bf16(F.conv2d, x, c.weight, c.bias, stride=c.stride, padding=c.padding,
                                 dilation=c.dilation, groups=c.groups)


class ModelNew(nn.Module):
    def __init__(self, input_channels, stages, block_widths, output_classes):
        super().__init__()
        self.stages = stages
        self.block_widths = block_widths
        layers = []
        current_channels = input_channels
        for i in range(stages):
            layers.append(self._make_stage(current_channels, block_widths[i]))
            current_channels = block_widths[i]
        self.feature_extractor = nn.Sequential(*layers)
        self.fc = nn.Linear(block_widths[-1], output_classes)
        self.run = cudal1.CudaGraph(self.graphed)
        self.captured = set()  # input signatures whose graph exists

    def _make_stage(self, in_channels, out_channels):
        return nn.Sequential(
            nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True),
            nn.Conv2d(out_channels, out_channels, kernel_size=3, padding=1),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=2, stride=2),
        )

    def graphed(self, x):
        for stage in self.feature_extractor:  # (B, C, H, W) -> (B, C', H/2, W/2)
            for m in stage:
                x = conv_fp32(m, x) if isinstance(m, nn.Conv2d) else m(x)
        x = torch.mean(x, dim=[2, 3])  # (B, block_widths[-1])
        return self.fc(x)

    def forward(self, x):
        key = (x.shape, x.dtype, x.device)
        if x.is_cuda and key not in self.captured:
            # the capture's two warm-up runs update BatchNorm's running statistics too: undo them
            saved = [b.clone() for b in self.buffers()]
            self.run(x)
            for b, s in zip(self.buffers(), saved):
                b.copy_(s)
            self.captured.add(key)
        return self.run(x)
