"""DenseNet dense block: each layer (BN, ReLU, 3x3 conv to growth_rate channels) sees the
concatenation of the input and all earlier layers' outputs:
(batch, C, H, W) -> (batch, C + num_layers * growth_rate, H, W).

BatchNorm runs in training mode (batch statistics). Dropout p=0.0 (identity). Concatenation
order: the original input first, then each new feature map in layer order.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
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
        features = [x]
        for layer in self.layers:
            new_feature = layer(x)
            features.append(new_feature)
            x = torch.cat(features, 1)  # re-concatenated every layer, as in the original
        return x


batch_size = 10
num_layers = 6
num_input_features = 32
growth_rate = 32
height = 224
width = 224


def get_inputs():
    return [torch.randn(batch_size, num_input_features, height, width)]


def get_init_inputs():
    return [num_layers, num_input_features, growth_rate]
