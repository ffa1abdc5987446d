"""Plain conv stack named RegNet: per stage two 3x3 conv+BN+ReLU and a 2x2 maxpool, then global
average pool and Linear: (batch, 3, H, W) -> (batch, output_classes).

Despite the name there are no residuals or group convs. BatchNorm runs in training mode.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
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

    def _make_stage(self, in_channels, out_channels):
        return nn.Sequential(
            nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(),
            nn.Conv2d(out_channels, out_channels, kernel_size=3, padding=1),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(),
            nn.MaxPool2d(kernel_size=2, stride=2),
        )

    def forward(self, x):
        x = self.feature_extractor(x)  # (B, block_widths[-1], H / 2**stages, W / 2**stages)
        x = torch.mean(x, dim=[2, 3])  # global average pool
        return self.fc(x)


batch_size = 8
input_channels = 3
image_height = 224
image_width = 224
stages = 3
block_widths = [64, 128, 256]
output_classes = 10


def get_inputs():
    return [torch.randn(batch_size, input_channels, image_height, image_width)]


def get_init_inputs():
    return [input_channels, stages, block_widths, output_classes]
