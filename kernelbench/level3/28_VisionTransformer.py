"""Vision Transformer: patch embedding, cls token, post-norm nn.TransformerEncoder, MLP head:
(2, channels, image_size, image_size) -> (2, num_classes).

Quirks kept on purpose (they change the math, so a faster version must keep them):
- patches come from unfold + a plain reshape with no permute, so a "patch" row is 768 consecutive
  elements of the (C, H/p, W/p, p, p) layout, not one patch's RGB pixels;
- the encoder is built with batch_first=False, so the (B, tokens, dim) tensor is read as
  (seq=B, batch=tokens, dim): self-attention mixes the images of the batch at each token position;
- nn.TransformerEncoder deep-copies one layer, so all layers start with identical weights.
The test config sets dropout = emb_dropout = 0.0, so dropout is the identity.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, image_size, patch_size, num_classes, dim, depth, heads, mlp_dim, channels=3,
                 dropout=0.1, emb_dropout=0.1):
        super().__init__()
        assert image_size % patch_size == 0, "image size must be divisible by the patch size"
        num_patches = (image_size // patch_size) ** 2
        patch_dim = channels * patch_size ** 2
        self.patch_size = patch_size
        self.pos_embedding = nn.Parameter(torch.randn(1, num_patches + 1, dim))
        self.patch_to_embedding = nn.Linear(patch_dim, dim)
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim))
        self.dropout = nn.Dropout(emb_dropout)
        self.transformer = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(d_model=dim, nhead=heads, dim_feedforward=mlp_dim, dropout=dropout),
            num_layers=depth,
        )
        self.to_cls_token = nn.Identity()
        self.mlp_head = nn.Sequential(
            nn.Linear(dim, mlp_dim),
            nn.GELU(),
            nn.Dropout(dropout),
            nn.Linear(mlp_dim, num_classes),
        )

    def forward(self, img):
        p = self.patch_size
        # (B, C, H/p, W/p, p, p) cut into rows of C*p*p without permuting (quirk)
        x = img.unfold(2, p, p).unfold(3, p, p).reshape(img.shape[0], -1, p * p * img.shape[1])
        x = self.patch_to_embedding(x)  # (B, num_patches, dim)
        cls_tokens = self.cls_token.expand(img.shape[0], -1, -1)
        x = torch.cat((cls_tokens, x), dim=1)  # (B, num_patches + 1, dim)
        x += self.pos_embedding
        x = self.dropout(x)
        x = self.transformer(x)  # sequence axis is the batch axis here (batch_first=False)
        x = self.to_cls_token(x[:, 0])  # (B, dim)
        return self.mlp_head(x)


image_size = 224
patch_size = 16
num_classes = 10
dim = 512
depth = 6
heads = 8
mlp_dim = 2048
channels = 3
dropout = 0.0
emb_dropout = 0.0


def get_inputs():
    return [torch.randn(2, channels, image_size, image_size)]


def get_init_inputs():
    return [image_size, patch_size, num_classes, dim, depth, heads, mlp_dim, channels, dropout, emb_dropout]
