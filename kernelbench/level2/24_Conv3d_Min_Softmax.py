"""Conv3d, min over depth, softmax over channels: (batch, 3, 16, 32, 32) -> (batch, 16, 30, 30)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, dim):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.dim = dim

    def forward(self, x):
        x = self.conv(x)  # (B, C, 14, 30, 30)
        x = torch.min(x, dim=self.dim).values  # dim=2 (depth) -> (B, C, 30, 30)
        x = torch.softmax(x, dim=1)
        return x


batch_size = 128
in_channels = 3
out_channels = 16
D = 16
H = 32
W = 32
kernel_size = 3
dim = 2


def get_inputs():
    return [torch.randn(batch_size, in_channels, D, H, W)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, dim]
