"""The softmax U-Net replayed from one CUDA graph, its convolutions in true fp32 -- slower than
eager, which runs them in TF32.

The forward is 9 DoubleConvs (conv 3x3, BatchNorm in training mode, softmax over the width, twice),
4 max-pools, 4 transposed convs, 4 concatenations and a 1x1 conv: ~100 launches counting the conv
bias that PyTorch adds after cuDNN returns and BatchNorm's statistics and apply kernels. A CUDA
graph (cudal1.CudaGraph) replays them with one launch and no Python in between, which saves the
host's share, a few hundred microseconds at most. BatchNorm reads and updates its running
statistics where they live at every replay, as eager does (the capture's two warm-up calls add two
extra updates on the first call; the outputs use batch statistics and do not depend on them).

But this task is not launch-bound; it is conv-bound. At batch 8 and 64 x 512 the convolutions are
~390 GFLOP (the decoders' first convs, 1024 -> 512 ... 128 -> 64 channels, ~39 GFLOP each, the
encoders' and decoders' second convs ~19 GFLOP each). Eager's 4.58 ms is ~85 TFLOP/s: cuDNN's
implicit GEMM on TF32 tensor cores, which PyTorch allows for convolutions by default. TF32 keeps 10
mantissa bits, ~1e-3 relative error per product, and the strict check allows 1e-4: eager's default
math misses the strict tolerance here by a factor of ~87,000, so this strict-fp32 solution races a
faster but far less accurate eager. Every conv here runs with cudnn.allow_tf32 off (turned off
inside the captured function, so the recorded kernels are fp32 FMA ones), and the H200 has only
~67 TFLOP/s of fp32 FMA at peak.

Measured on the H200: 0.33x vs eager (4.58 ms -> 13.9 ms), three times slower: the 390 GFLOP run at
~28 TFLOP/s in fp32 (BatchNorm and softmax included), and the graph's host saving cannot win that
back. Only a conv that is fp32-accurate and still uses tensor cores (3xTF32, big/small split, in a
custom kernel) could race eager here.

Left alone: each conv's bias is cancelled by the training-mode BatchNorm that follows (it shifts
the batch mean by exactly the bias), so dropping it would save ~1 GB of activation traffic, but
BatchNorm's running_mean would then need the bias added back by hand; ~2% of a conv-bound forward.
"""
import torch
import torch.nn as nn

import cudal1


class DoubleConv(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.double_conv = nn.Sequential(
            nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1),
            nn.BatchNorm2d(out_channels),
            nn.Softmax(dim=-1),  # over the width
            nn.Conv2d(out_channels, out_channels, kernel_size=3, padding=1),
            nn.BatchNorm2d(out_channels),
            nn.Softmax(dim=-1),
        )

    def forward(self, x):
        return self.double_conv(x)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, features):
        super().__init__()
        f = features
        self.encoder1 = DoubleConv(in_channels, f)
        self.pool1 = nn.MaxPool2d(kernel_size=2, stride=2)
        self.encoder2 = DoubleConv(f, f * 2)
        self.pool2 = nn.MaxPool2d(kernel_size=2, stride=2)
        self.encoder3 = DoubleConv(f * 2, f * 4)
        self.pool3 = nn.MaxPool2d(kernel_size=2, stride=2)
        self.encoder4 = DoubleConv(f * 4, f * 8)
        self.pool4 = nn.MaxPool2d(kernel_size=2, stride=2)
        self.bottleneck = DoubleConv(f * 8, f * 16)
        self.upconv4 = nn.ConvTranspose2d(f * 16, f * 8, kernel_size=2, stride=2)
        self.decoder4 = DoubleConv(f * 16, f * 8)
        self.upconv3 = nn.ConvTranspose2d(f * 8, f * 4, kernel_size=2, stride=2)
        self.decoder3 = DoubleConv(f * 8, f * 4)
        self.upconv2 = nn.ConvTranspose2d(f * 4, f * 2, kernel_size=2, stride=2)
        self.decoder2 = DoubleConv(f * 4, f * 2)
        self.upconv1 = nn.ConvTranspose2d(f * 2, f, kernel_size=2, stride=2)
        self.decoder1 = DoubleConv(f * 2, f)
        self.final_conv = nn.Conv2d(f, out_channels, kernel_size=1)
        self.graph = cudal1.CudaGraph(self._forward)

    def _unet(self, x):
        enc1 = self.encoder1(x)  # (B, f, H, W)
        enc2 = self.encoder2(self.pool1(enc1))  # (B, 2f, H/2, W/2)
        enc3 = self.encoder3(self.pool2(enc2))  # (B, 4f, H/4, W/4)
        enc4 = self.encoder4(self.pool3(enc3))  # (B, 8f, H/8, W/8)
        bottleneck = self.bottleneck(self.pool4(enc4))  # (B, 16f, H/16, W/16)
        dec4 = self.decoder4(torch.cat((self.upconv4(bottleneck), enc4), dim=1))  # upsampled first, skip second
        dec3 = self.decoder3(torch.cat((self.upconv3(dec4), enc3), dim=1))
        dec2 = self.decoder2(torch.cat((self.upconv2(dec3), enc2), dim=1))
        dec1 = self.decoder1(torch.cat((self.upconv1(dec2), enc1), dim=1))  # (B, f, H, W)
        return self.final_conv(dec1)

    def _forward(self, x):
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # true fp32 convs, as the check requires
        try:
            return self._unet(x)
        finally:
            torch.backends.cudnn.allow_tf32 = tf32

    def forward(self, x):
        return self.graph(x)
