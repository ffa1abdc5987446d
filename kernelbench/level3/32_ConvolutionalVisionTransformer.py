"""Conv "vision transformer": a patch conv, the whole image flattened into ONE token, a cls token,
six post-norm nn.TransformerEncoderLayers, Linear on the cls slot:
(batch, 3, 32, 32) -> (batch, num_classes).

Quirk kept on purpose: the layers use batch_first=False, so the (B, 2, embed_dim) tensor is read
as (seq=B, batch=2, dim) and attention runs across the images of the batch, separately for the
cls slot and the image slot. linear_proj hard-codes a 32x32 input. Dropout is 0. The layers are
separate instances, each drawn from the RNG in turn.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, num_classes, embed_dim=512, num_heads=8, num_layers=6, mlp_ratio=4.0, patch_size=4,
                 in_channels=3):
        super().__init__()
        self.patch_size = patch_size
        self.conv1 = nn.Conv2d(in_channels, embed_dim, kernel_size=patch_size, stride=patch_size)
        self.flatten = nn.Flatten()
        self.linear_proj = nn.Linear(embed_dim * (32 // patch_size) * (32 // patch_size), embed_dim)
        self.transformer_layers = nn.ModuleList([
            nn.TransformerEncoderLayer(d_model=embed_dim, nhead=num_heads,
                                       dim_feedforward=int(embed_dim * mlp_ratio), dropout=0.0)
            for _ in range(num_layers)
        ])
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.fc_out = nn.Linear(embed_dim, num_classes)

    def forward(self, x):
        B = x.size(0)
        x = self.conv1(x)  # (B, embed_dim, 32/p, 32/p)
        x = self.flatten(x)  # (B, embed_dim * (32/p)^2)
        x = self.linear_proj(x)  # (B, embed_dim): one token per image
        cls_tokens = self.cls_token.expand(B, -1, -1)
        x = torch.cat((cls_tokens, x.unsqueeze(1)), dim=1)  # (B, 2, embed_dim)
        for layer in self.transformer_layers:
            x = layer(x)  # sequence axis is the batch axis here (batch_first=False)
        x = x[:, 0]  # (B, embed_dim)
        return self.fc_out(x)


batch_size = 10
image_size = 32
embed_dim = 128
in_channels = 3
num_heads = 4
num_classes = 1000


def get_inputs():
    return [torch.randn(batch_size, in_channels, image_size, image_size)]


def get_init_inputs():
    return [num_classes, embed_dim, num_heads]
