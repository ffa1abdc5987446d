"""The fire module with its two ReLUs and the concatenation done as one write into the output, convs
in true fp32, and no CUDA graph: on par with eager.

Eager: squeeze conv (+ bias add), ReLU, expand1x1 conv (+ bias), ReLU, expand3x3 conv (+ bias), ReLU,
then torch.cat, ~10 launches over big tensors: each expand output is (10, 64, 224, 224), 128 MB, and
the concatenation (257 MB) is read and written once more. Here each expand's ReLU is
torch.clamp_min(e, 0, out=y[:, slice]), writing straight into its channel range of the output: the
two separate ReLU passes (read and write 128 MB each) and the concatenation (read and write 257 MB)
become two passes that read 128 MB and write it into place, ~0.5 GB less traffic, ~0.1 ms at H200
bandwidth. The result is bit for bit the reference's (max(e, 0), same convs).

No CUDA graph: the ~10 launches hide behind GPU work, and a graph would clone the 257 MB output on
every call (~0.1 ms), the whole saving above.

TF32: with 3 input and 6 squeeze channels the convs have K = 3, 6 (1x1) and 54 (3x3); eager under
PyTorch's default flags matched the strict reference exactly (error 0 in tolerance units), so cuDNN
runs these thin convs without TF32 on both sides: eager already meets the strict tolerance and
there is no race. Measured on the H200: 1.01x vs eager (0.889 ms -> 0.876 ms), a difference inside
the rounds' spread (interquartile ranges of ~0.03 ms). Eager's call moves ~1.35 GB, ~0.28 ms at full
bandwidth, yet takes 0.89 ms, so the three convs, far from bandwidth-bound with so few channels,
most likely set the time and the saved elementwise passes are too small a share to show. A gain
would need faster convs: e.g. one kernel for the squeeze, its ReLU and both expands, keeping the
6-channel squeeze output on chip.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_channels, squeeze_channels, expand1x1_channels, expand3x3_channels):
        super().__init__()
        self.squeeze = nn.Conv2d(in_channels, squeeze_channels, kernel_size=1)
        self.squeeze_activation = nn.ReLU(inplace=True)
        self.expand1x1 = nn.Conv2d(squeeze_channels, expand1x1_channels, kernel_size=1)
        self.expand1x1_activation = nn.ReLU(inplace=True)
        self.expand3x3 = nn.Conv2d(squeeze_channels, expand3x3_channels, kernel_size=3, padding=1)
        self.expand3x3_activation = nn.ReLU(inplace=True)

    def forward(self, x):
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # true fp32, as the check requires
        try:
            s = self.squeeze_activation(self.squeeze(x))  # (B, S, H, W), ReLU in place on the conv's output
            e1, e3 = self.expand1x1(s), self.expand3x3(s)  # (B, E1, H, W), (B, E3, H, W)
            n, c1, h, w = e1.shape
            y = e1.new_empty(n, c1 + e3.shape[1], h, w)
            torch.clamp_min(e1, 0, out=y[:, :c1])  # ReLU and concatenation in one pass each
            torch.clamp_min(e3, 0, out=y[:, c1:])
            return y
        finally:
            torch.backends.cudnn.allow_tf32 = tf32
