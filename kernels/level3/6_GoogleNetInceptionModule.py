"""One Inception module on a (10, 480, 224, 224) input: the three 1x1 convs that read x become one,
in strict fp32, and no CUDA graph. Compute-bound, and slower than eager's TF32 convs.

The module is six convs and a maxpool, concatenated on channels: 188 G multiply-adds (377 GFLOP),
over a 963 MB input to a 1.03 GB output. Three of the convs are 1x1 convs of the same x
(branch1x1 480->192, and the reducers of the 3x3 and 5x5 branches, 480->96 and 480->16). Here
their weights and biases are concatenated (304 x 480, 584 KB, a copy each call so that a changed
weight is always seen) into one 480->304 conv: one cuDNN GEMM reads x where three did, one bias
kernel follows instead of three, and the reducers' outputs are channel slices of its result
(PyTorch makes each slice contiguous for cuDNN: 225 MB copied before the 3x3 and 5x5 convs). At
best that saves two of the passes over the 963 MB input (~0.4 ms of HBM traffic at 4.8 TB/s),
less the copies, and less if cuDNN's tiling re-reads x anyway. Each output channel is still the same
480-term fp32 dot product, so the result agrees with the separate convs to fp32 rounding.

No CUDA graph: the forward is about 14 kernels, most of them on hundreds of MB for tens to
thousands of microseconds, so eager launching already runs far ahead of the GPU, while a graph
would add a copy of the 963 MB input into its buffer and a clone of the 1.03 GB output, ~0.8 ms
of traffic for nothing.

The precision race decides the ratio. Eager's default TF32 convs are 24x outside the strict
tolerance, so forward turns cudnn.allow_tf32 off around the convs, while the eager reference is
timed with cuDNN's TF32 tensor cores. 377 GFLOP is 5.6 ms at the H200's 67 TFLOP/s fp32 peak and
0.76 ms at its 495 TFLOP/s dense TF32 peak (datasheet figures); the strict module runs at about
22 TFLOP/s. Measured on the H200: 0.50x vs eager (8.47 ms -> 16.8 ms), slower by 8.3 ms, which the
merge's saving of at most ~0.4 ms cannot touch. Winning would take convs exact to fp32 on tensor
cores (3xTF32 splitting as an implicit GEMM), not cuDNN's plain fp32 kernels.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_1x1, reduce_3x3, out_3x3, reduce_5x5, out_5x5, pool_proj):
        super().__init__()
        self.branch1x1 = nn.Conv2d(in_channels, out_1x1, kernel_size=1)
        self.branch3x3 = nn.Sequential(
            nn.Conv2d(in_channels, reduce_3x3, kernel_size=1),
            nn.Conv2d(reduce_3x3, out_3x3, kernel_size=3, padding=1),
        )
        self.branch5x5 = nn.Sequential(
            nn.Conv2d(in_channels, reduce_5x5, kernel_size=1),
            nn.Conv2d(reduce_5x5, out_5x5, kernel_size=5, padding=2),
        )
        self.branch_pool = nn.Sequential(
            nn.MaxPool2d(kernel_size=3, stride=1, padding=1),
            nn.Conv2d(in_channels, pool_proj, kernel_size=1),
        )

    def forward(self, x):
        c1, r3, r5 = self.branch1x1, self.branch3x3[0], self.branch5x5[0]
        n1, n3 = c1.out_channels, r3.out_channels
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # true fp32 convs, as the check requires
        try:
            w = torch.cat([c1.weight, r3.weight, r5.weight])  # (304, Cin, 1, 1)
            b = torch.cat([c1.bias, r3.bias, r5.bias])
            y = F.conv2d(x, w, b)  # (B, 304, H, W): the three 1x1 convs of x at once
            b3 = self.branch3x3[1](y[:, n1:n1 + n3])  # (B, 208, H, W)
            b5 = self.branch5x5[1](y[:, n1 + n3:])  # (B, 48, H, W)
            bp = self.branch_pool(x)  # (B, 64, H, W)
            return torch.cat([y[:, :n1], b3, b5, bp], dim=1)  # (B, 512, H, W)
        finally:
            torch.backends.cudnn.allow_tf32 = tf32
