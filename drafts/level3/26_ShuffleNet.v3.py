"""ShuffleNet (groups=3) replayed from one CUDA graph, its dense 1x1 convs as TF32 + bf16, the rest in
true fp32.

The network is many small ops: the stem (conv, BatchNorm, ReLU, maxpool), 13 units of 1x1 group
conv, BN, ReLU, 3x3 depthwise conv, BN, channel shuffle (a transpose copy), 1x1 group conv, BN, ReLU
and the residual add (3 of them with a conv+BN shortcut), then conv5, BN, ReLU, the pool and the
Linear: ~140 module calls and ~230 aten ops per forward (a training-mode BatchNorm is a statistics
pass and an apply pass). At batch 10 each op runs for tens of microseconds, so eager pays Python and
the launch path between every pair. cudal1.CudaGraph captures the whole forward once per input shape
and replays it as one graph launch: the same kernels back to back, with no host work in between; the
input is copied into the graph's buffer and the output cloned.

BatchNorm stays in training mode: it normalises with batch statistics and updates its running
statistics at every replay, as eager does, so conv+BN cannot be folded. The capture runs the forward
twice before recording it (lazy init, cuDNN plans); those runs would update the running statistics
two extra times, so the first call of each input shape saves every buffer, captures, restores them
and then replays: the running statistics see exactly one update per call.

The TF32 race decides the GPU time. Eager lets cuDNN use TF32 (~1e-3 relative error), and on this
task eager's default math misses the strict tolerance by a factor of 1.9, so this strict-fp32
solution races a faster but less accurate eager. The net is not as thin as it looks: of its ~145
GFLOP, conv5 (960 -> 1024 at 56x56) is 62 and the dense 1x1 shortcut of stage 4 (480 -> 960) 29; the
group convs are ~48 and the depthwise ones under 1. Exact fp32 on the CUDA cores would make those
GEMMs several times slower than eager's tensor cores, so the four dense (groups=1) 1x1 convs run as
TF32 + bf16 (cudal1.conv_tf32_bf16): x = hi + lo with hi exact in TF32, the weight likewise; hi*hi
as a TF32 conv (a product of two TF32 numbers is exact, the sums fp32) and the cross terms hi*lo +
lo*hi, ~2^-11 of the result, as ONE bf16 conv of [hi_x, lo_x] (2x the channels) against [lo_w,
hi_w], where bf16's 8-bit mantissa costs ~2^-19 of the result; lo*lo (~2^-22) is dropped. That is
about two TF32 convs' work (bf16 runs at twice TF32's rate), where 3xTF32, the same products as one
TF32 conv over 3x the channels, is three, plus a split pass writing 2x the input in bf16. The group
convs (K = 80..320 per group, low arithmetic intensity) and the depthwise convs stay exact fp32
(cudnn.allow_tf32 off), judged not worth the split's extra traffic. cudnn.benchmark is on for the
capture, so cuDNN times its algorithms for these grouped and depthwise shapes instead of guessing.

With 3xTF32 for the dense convs this file measured 0.75x vs eager on the H200 (9.18 ms -> 12.3 ms);
this version is not yet measured. The graph removes the host overhead, so what is left is GPU time,
most likely the convolutions: 3x the tensor-core work plus the split traffic on the dense convs, and
exact fp32 on the CUDA cores for the ~48 GFLOP of group convs, where eager runs TF32. To win, the
convs must be fp32-accurate at close to TF32 cost: the split done in registers inside the conv
kernel (no 3x-wide input in memory), applied to the group convs too, and BN-apply + ReLU + residual
add fused into one pass over each unit's output (60-120 MB at stages 3-4) instead of three.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1


def conv_fp32(c, x):
    """c(x) for a groups=1 Conv2d at fp32 accuracy on TF32 and bf16 tensor cores (cudal1.conv_tf32_bf16)."""
    return cudal1.conv_tf32_bf16(F.conv2d, x, c.weight, c.bias, stride=c.stride, padding=c.padding,
                                 dilation=c.dilation, groups=c.groups)


class ChannelShuffle(nn.Module):
    def __init__(self, groups):
        super().__init__()
        self.groups = groups

    def forward(self, x):
        B, C, H, W = x.size()
        x = x.view(B, self.groups, C // self.groups, H, W)
        return x.transpose(1, 2).contiguous().view(B, -1, H, W)  # new channel j*groups+i <- old i*cpg+j


class ShuffleNetUnit(nn.Module):
    def __init__(self, in_channels, out_channels, groups=3):
        super().__init__()
        assert out_channels % 4 == 0
        mid_channels = out_channels // 4
        self.conv1 = nn.Conv2d(in_channels, mid_channels, 1, stride=1, padding=0, groups=groups, bias=False)
        self.bn1 = nn.BatchNorm2d(mid_channels)
        self.conv2 = nn.Conv2d(mid_channels, mid_channels, 3, stride=1, padding=1, groups=mid_channels, bias=False)
        self.bn2 = nn.BatchNorm2d(mid_channels)
        self.conv3 = nn.Conv2d(mid_channels, out_channels, 1, stride=1, padding=0, groups=groups, bias=False)
        self.bn3 = nn.BatchNorm2d(out_channels)
        self.shuffle = ChannelShuffle(groups)
        if in_channels == out_channels:
            self.shortcut = nn.Sequential()
        else:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, kernel_size=1, stride=1, padding=0, bias=False),
                nn.BatchNorm2d(out_channels),
            )

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)), inplace=True)
        out = self.bn2(self.conv2(out))  # no activation after the depthwise conv
        out = self.shuffle(out)
        out = F.relu(self.bn3(self.conv3(out)), inplace=True)
        if len(self.shortcut):  # conv + BN; the conv is dense, so 3xTF32
            out += self.shortcut[1](conv_fp32(self.shortcut[0], x))
        else:
            out += x  # no ReLU after the add
        return out


class ModelNew(nn.Module):
    def __init__(self, num_classes=1000, groups=3, stages_repeats=[3, 7, 3], stages_out_channels=[24, 240, 480, 960]):
        super().__init__()
        self.conv1 = nn.Conv2d(3, stages_out_channels[0], kernel_size=3, stride=2, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(stages_out_channels[0])
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.stage2 = self._make_stage(stages_out_channels[0], stages_out_channels[1], stages_repeats[0], groups)
        self.stage3 = self._make_stage(stages_out_channels[1], stages_out_channels[2], stages_repeats[1], groups)
        self.stage4 = self._make_stage(stages_out_channels[2], stages_out_channels[3], stages_repeats[2], groups)
        self.conv5 = nn.Conv2d(stages_out_channels[3], 1024, kernel_size=1, stride=1, padding=0, bias=False)
        self.bn5 = nn.BatchNorm2d(1024)
        self.fc = nn.Linear(1024, num_classes)
        self.run = cudal1.CudaGraph(self.graphed)
        self.captured = set()  # input signatures whose graph exists

    def _make_stage(self, in_channels, out_channels, repeats, groups):
        layers = [ShuffleNetUnit(in_channels, out_channels, groups)]
        for _ in range(1, repeats):
            layers.append(ShuffleNetUnit(out_channels, out_channels, groups))
        return nn.Sequential(*layers)

    def graphed(self, x):
        cudnn = torch.backends.cudnn
        tf32, bench = cudnn.allow_tf32, cudnn.benchmark
        cudnn.allow_tf32, cudnn.benchmark = False, True  # true fp32 unless 3xTF32; time the algorithms
        try:
            x = F.relu(self.bn1(self.conv1(x)), inplace=True)  # (B, 24, 112, 112)
            x = self.maxpool(x)  # (B, 24, 56, 56)
            x = self.stage4(self.stage3(self.stage2(x)))  # (B, 960, 56, 56): units never downsample
            x = F.relu(self.bn5(conv_fp32(self.conv5, x)), inplace=True)  # (B, 1024, 56, 56), 62 GFLOP
            x = F.adaptive_avg_pool2d(x, (1, 1)).flatten(1)  # (B, 1024)
            return self.fc(x)
        finally:
            cudnn.allow_tf32, cudnn.benchmark = tf32, bench

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
