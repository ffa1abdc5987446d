"""The dense block as the reference runs it, with cuDNN's TF32 off, and no CUDA graph: an honest
strict-fp32 baseline for a conv-bound task, slower than eager.

Per layer: BatchNorm (cuDNN, batch statistics, plus the num_batches_tracked add), in-place ReLU, a
3x3 conv C_i -> 32 and the re-concatenation, about five launches; 30 for the six layers. Dropout(0.0)
is the identity (ATen returns its input without a launch), so it is left out. The work is far larger
than the launches: each conv is 2 * 10 * 224 * 224 * 32 * 9 * C_i FLOPs, 194 GFLOP over
C_i = 32, 64, ..., 192, and the tensors are big (one channel of the batch is 2 MB, the output 450 MB;
BN, ReLU, convs and the six growing concatenations move ~12 GB, ~2.5 ms at H200 bandwidth).

A CUDA graph would save ~30 launches that already hide behind milliseconds of GPU work, and would
add a copy of the 64 MB input and a clone of the 450 MB output (~0.2 ms of traffic) to every call,
so there is none. Keeping the concatenation in one preallocated buffer does not pay either: cuDNN's
BatchNorm makes its channel-slice input contiguous, a copy as large as the concatenation it replaces.

TF32: eager's timed run lets cuDNN run these convs in TF32 on tensor cores (~494 TFLOP/s dense on an
H200), 22x outside the strict tolerance, while the strict check forces fp32 (~67 TFLOP/s peak:
2.9 ms for 194 GFLOP even at peak). Measured on the H200: 0.57x vs eager (6.49 ms -> 11.5 ms), slower
by 5.0 ms, which is the losing side of the TF32 race. Winning it would take a convolution that is
exact to fp32 yet uses tensor cores (e.g. 3xTF32 splitting as an implicit GEMM, not through cuDNN,
whose Winograd kernels would spoil the split).
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
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
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # true fp32, as the check requires
        try:
            features = [x]
            for bn, relu, conv, _ in self.layers:  # _ is Dropout(0.0): the identity
                features.append(conv(relu(bn(x))))  # (B, growth, H, W)
                x = torch.cat(features, 1)  # (B, C_i + growth, H, W)
            return x
        finally:
            torch.backends.cudnn.allow_tf32 = tf32
