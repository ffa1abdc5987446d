"""U-Net with four down and four up stages whose double convs use softmax (over the image WIDTH,
dim=-1) where ReLU would be: (batch, in_channels, H, W) -> (batch, out_channels, H, W).

The softmax over width is unusual but intentional (it is the benchmark). BatchNorm runs in
training mode (batch statistics). H and W must be divisible by 16. Skip concatenations put the
upsampled tensor first and the encoder tensor second.
"""
import torch
import torch.nn as nn


class DoubleConv(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.double_conv = nn.Sequential(
            nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1),
            nn.BatchNorm2d(out_channels),
            nn.Softmax(dim=-1),
            nn.Conv2d(out_channels, out_channels, kernel_size=3, padding=1),
            nn.BatchNorm2d(out_channels),
            nn.Softmax(dim=-1),
        )

    def forward(self, x):
        return self.double_conv(x)


class Model(nn.Module):
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

    def forward(self, x):
        enc1 = self.encoder1(x)  # (B, f, H, W)
        enc2 = self.encoder2(self.pool1(enc1))  # (B, 2f, H/2, W/2)
        enc3 = self.encoder3(self.pool2(enc2))  # (B, 4f, H/4, W/4)
        enc4 = self.encoder4(self.pool3(enc3))  # (B, 8f, H/8, W/8)
        bottleneck = self.bottleneck(self.pool4(enc4))  # (B, 16f, H/16, W/16)
        dec4 = self.decoder4(torch.cat((self.upconv4(bottleneck), enc4), dim=1))
        dec3 = self.decoder3(torch.cat((self.upconv3(dec4), enc3), dim=1))
        dec2 = self.decoder2(torch.cat((self.upconv2(dec3), enc2), dim=1))
        dec1 = self.decoder1(torch.cat((self.upconv1(dec2), enc1), dim=1))  # (B, f, H, W)
        return self.final_conv(dec1)


batch_size = 8
in_channels = 8
out_channels = 4
height = 64
width = 512
features = 64


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, features]
