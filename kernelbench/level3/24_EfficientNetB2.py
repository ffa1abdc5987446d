"""EfficientNet-B2 layout with a broken squeeze-excitation: stem conv, five MBConv blocks, 1x1 conv
to 1408, global average pool, Linear: (batch, 3, 224, 224) -> (batch, num_classes).

Quirk kept on purpose: each block's "SE" part is just appended to the block's Sequential, so the
sigmoid output (not a gated feature map) feeds the projection conv. The spatial size therefore
collapses to 1x1 inside mbconv1 and every later block runs on 1x1 maps. BatchNorm runs in
training mode, with only batch_size values per channel there (batch 1 would fail). ReLU everywhere.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, kernel_size=3, stride=2, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(32)
        self.relu = nn.ReLU(inplace=True)
        self.mbconv1 = self._make_mbconv_block(32, 96, 1, 3)
        self.mbconv2 = self._make_mbconv_block(96, 144, 2, 6)
        self.mbconv3 = self._make_mbconv_block(144, 192, 2, 6)
        self.mbconv4 = self._make_mbconv_block(192, 288, 2, 6)
        self.mbconv5 = self._make_mbconv_block(288, 384, 1, 6)
        self.conv_final = nn.Conv2d(384, 1408, kernel_size=1, stride=1, padding=0, bias=False)
        self.bn_final = nn.BatchNorm2d(1408)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(1408, num_classes)

    def _make_mbconv_block(self, in_channels, out_channels, stride, expand_ratio):
        layers = []
        expanded = in_channels * expand_ratio
        if expand_ratio != 1:
            layers += [
                nn.Conv2d(in_channels, expanded, kernel_size=1, stride=1, padding=0, bias=False),
                nn.BatchNorm2d(expanded),
                nn.ReLU(inplace=True),
            ]
        layers += [
            nn.Conv2d(expanded, expanded, kernel_size=3, stride=stride, padding=1, groups=expanded, bias=False),
            nn.BatchNorm2d(expanded),
            nn.ReLU(inplace=True),
        ]
        # "squeeze-excitation" applied in sequence, never multiplied back (quirk)
        layers += [
            nn.AdaptiveAvgPool2d((1, 1)),
            nn.Conv2d(expanded, expanded // 4, kernel_size=1, stride=1, padding=0, bias=False),
            nn.ReLU(inplace=True),
            nn.Conv2d(expanded // 4, expanded, kernel_size=1, stride=1, padding=0, bias=False),
            nn.Sigmoid(),
        ]
        layers += [
            nn.Conv2d(expanded, out_channels, kernel_size=1, stride=1, padding=0, bias=False),
            nn.BatchNorm2d(out_channels),
        ]
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))  # (B, 32, 112, 112)
        x = self.mbconv1(x)  # (B, 96, 1, 1): the SE pool collapsed the map
        x = self.mbconv2(x)
        x = self.mbconv3(x)
        x = self.mbconv4(x)
        x = self.mbconv5(x)  # (B, 384, 1, 1)
        x = self.relu(self.bn_final(self.conv_final(x)))
        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        return self.fc(x)


batch_size = 2
num_classes = 1000


def get_inputs():
    return [torch.randn(batch_size, 3, 224, 224)]


def get_init_inputs():
    return [num_classes]
