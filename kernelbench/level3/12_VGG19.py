"""VGG-19: 16 3x3 conv+ReLU layers in five stages (2, 2, 4, 4, 4), each stage ending in a 2x2 maxpool, then
three Linear layers: (batch, 3, 224, 224) -> (batch, num_classes).

No BatchNorm. The dropouts have p=0.0 (identity). The input must be 224x224: the classifier
expects a 512x7x7 feature map.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        layers = []
        in_ch = 3
        for out_ch, n in zip([64, 128, 256, 512, 512], [2, 2, 4, 4, 4]):
            for _ in range(n):
                layers += [nn.Conv2d(in_ch, out_ch, kernel_size=3, padding=1), nn.ReLU(inplace=True)]
                in_ch = out_ch
            layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(
            nn.Linear(512 * 7 * 7, 4096),
            nn.ReLU(inplace=True),
            nn.Dropout(p=0.0),
            nn.Linear(4096, 4096),
            nn.ReLU(inplace=True),
            nn.Dropout(p=0.0),
            nn.Linear(4096, num_classes),
        )

    def forward(self, x):
        x = self.features(x)  # (B, 512, 7, 7)
        x = torch.flatten(x, 1)  # (B, 25088)
        return self.classifier(x)


batch_size = 10
num_classes = 1000


def get_inputs():
    return [torch.randn(batch_size, 3, 224, 224)]


def get_init_inputs():
    return [num_classes]
