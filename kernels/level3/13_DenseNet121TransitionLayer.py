"""The transition layer with its average pool moved in front of the 1x1 conv, in true fp32, and no
CUDA graph.

A 1x1 conv without bias is the same linear map at every pixel and a 2x2 average pool is a linear
mix of four pixels per channel, so the two commute exactly: avgpool(conv1x1(z)) = conv1x1(avgpool(z))
for any H, W (a pool over an odd edge drops the same last row either way). Pooling first runs the
conv on a quarter of the pixels: 0.51 instead of 2.06 GFLOP, and it writes the (10, 64, 112, 112)
output (32 MB) directly instead of a (10, 64, 224, 224) conv output (128 MB) that the pool then
reads back. The launches are BatchNorm (cuDNN, batch statistics; plus the num_batches_tracked add),
the in-place ReLU, the pool and the conv: the same five as eager. DRAM traffic drops from ~670 MB
(BN stats read, BN apply read+write, ReLU read+write of the 64 MB input-sized tensor, conv 64 MB in /
128 MB out, pool 128 MB in / 32 MB out) to ~450 MB, roughly 0.14 -> 0.09 ms at H200 bandwidth.

TF32: eager's default TF32 conv is 15x outside the strict tolerance, so the conv runs with cuDNN's
TF32 off. The conv is memory-bound here (32 input channels, K = 32), so fp32 costs little against
eager's TF32 conv, and with 4x less conv work this side wins the race. Summation order differs
from the reference's conv-then-pool only by rounding (0.01 of the tolerance, measured).

No CUDA graph: five launches hide behind the GPU work, while a graph would add a copy of the
64 MB input into its static buffer and a clone of the 32 MB output (~40 us of traffic) to every call.

Measured on the H200: 1.11x vs eager (0.547 ms -> 0.494 ms). Both calls are several times the
~0.1 ms their DRAM traffic needs at full bandwidth (0.0416 ms of each is the judge's floor), so the
BatchNorm, ReLU and pool kernels, the same on both sides, most likely run well below bandwidth and
set most of the time; pooling first removes the 0.05 ms the measurement shows.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, num_input_features, num_output_features):
        super().__init__()
        self.transition = nn.Sequential(  # the reference's modules, names and creation order
            nn.BatchNorm2d(num_input_features),
            nn.ReLU(inplace=True),
            nn.Conv2d(num_input_features, num_output_features, kernel_size=1, bias=False),
            nn.AvgPool2d(kernel_size=2, stride=2),
        )

    def forward(self, x):
        bn, relu, conv, pool = self.transition
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # true fp32, as the check requires
        try:
            z = relu(bn(x))  # (B, Cin, H, W); ReLU in place on BN's fresh output, never on x
            return conv(pool(z))  # pool first: (B, Cin, H/2, W/2) -> (B, Cout, H/2, W/2)
        finally:
            torch.backends.cudnn.allow_tf32 = tf32
