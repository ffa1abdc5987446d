"""Swin Transformer V2 replayed from one CUDA graph.

Swin-T layout at batch 10: patch embedding, 12 blocks of windowed cosine attention over 3136, 784,
196 and 49 tokens (96 to 768 channels), 3 patch mergings, LayerNorm, pool, head: ~470 aten ops and
~90 GFLOP per forward. Each block is ~35 small ops: the continuous position bias recomputed from
the parameters (cpb_mlp's two Linears over the 13x13 offset table, the gather, permute, 16 *
sigmoid), the q/k/v bias concatenation, the qkv Linear, two F.normalize (norm, clamp, divide
each), the q k^T bmm, the clamped exp of the logit scale and its multiply, the bias add, the -100
mask add on shifted blocks, softmax, the bmm with v, the projection, the rolls, window partition
and reverse copies, the post-norms, the MLP and two residual adds. The tensors are small (the
widest, 10 x 3136 x 96, is 12 MB; a stage-1 attention matrix 640 windows x 3 heads x 49 x 49 is
18 MB), so each kernel runs for microseconds and eager is bound by the host: Python, module
dispatch and one launch per op. cudal1.CudaGraph captures the whole forward once per input shape
and replays it as one graph launch, the same kernels with no host gaps between them; the input is
copied into the graph's buffer and the output cloned. The position bias is still recomputed from
the parameters at every replay (a dozen tiny kernels per block), so nothing derived from the
weights is cached. No state: dropout is 0, drop_path the identity, the buffers are constants.

Measured on the H200: 3.64x vs eager (21.0 ms -> 5.77 ms). Eager's 21.0 ms is ~45 us per op, host
time; the graph's 5.77 ms is the kernels' own GPU time.

No TF32 race: the Linears and bmms are exact fp32 on both sides (PyTorch's default keeps TF32 off
for matmuls), the only convolution, the patch embedding (3 -> 96, 4x4 stride 4, ~0.3 GFLOP), runs
with cudnn.allow_tf32 off, and eager already meets the strict tolerance. The math is the
reference's, op for op; the next step would be one fused windowed-attention kernel per block
(normalize, scale, bias, mask, softmax and both products in shared memory: a 49x49 tile per window
and head).
"""
import collections.abc
import math
from itertools import repeat

import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1


def _ntuple(n):
    """A converter: an iterable becomes a tuple, a scalar is repeated n times."""
    return lambda x: tuple(x) if isinstance(x, collections.abc.Iterable) else tuple(repeat(x, n))


class Mlp(nn.Module):
    def __init__(self, in_features, hidden_features=None, out_features=None, act_layer=nn.GELU, drop=0.0):
        super().__init__()
        out_features = out_features or in_features
        hidden_features = hidden_features or in_features
        self.fc1 = nn.Linear(in_features, hidden_features)
        self.act = act_layer()
        self.fc2 = nn.Linear(hidden_features, out_features)
        self.drop = nn.Dropout(drop)

    def forward(self, x):
        x = self.drop(self.act(self.fc1(x)))
        return self.drop(self.fc2(x))


def window_partition(x, window_size):
    """(B, H, W, C) -> (B * H/ws * W/ws, ws, ws, C)"""
    B, H, W, C = x.shape
    x = x.view(B, H // window_size, window_size, W // window_size, window_size, C)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, window_size, window_size, C)


def window_reverse(windows, window_size, H, W):
    """(B * H/ws * W/ws, ws, ws, C) -> (B, H, W, C), the inverse of window_partition"""
    nh, nw = H // window_size, W // window_size
    B = windows.shape[0] // (nh * nw)
    x = windows.view(B, nh, nw, window_size, window_size, -1)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(B, H, W, -1)


class WindowAttention(nn.Module):
    def __init__(self, dim, window_size, num_heads, qkv_bias=True, attn_drop=0.0, proj_drop=0.0,
                 pretrained_window_size=[0, 0]):
        super().__init__()
        self.dim = dim
        self.window_size = window_size  # (Wh, Ww)
        self.pretrained_window_size = pretrained_window_size
        self.num_heads = num_heads
        Wh, Ww = window_size

        self.logit_scale = nn.Parameter(torch.log(10 * torch.ones((num_heads, 1, 1))))
        # continuous position bias: an MLP from a 2-d offset to one bias per head
        self.cpb_mlp = nn.Sequential(
            nn.Linear(2, 512, bias=True),
            nn.ReLU(inplace=True),
            nn.Linear(512, num_heads, bias=False),
        )

        # (1, 2Wh-1, 2Ww-1, 2) table of offsets (dh, dw), scaled to [-8, 8], then log-spaced
        dh = torch.arange(-(Wh - 1), Wh, dtype=torch.float32)
        dw = torch.arange(-(Ww - 1), Ww, dtype=torch.float32)
        table = torch.stack(torch.meshgrid(dh, dw, indexing="ij")).permute(1, 2, 0).contiguous().unsqueeze(0)
        if pretrained_window_size[0] > 0:
            table[:, :, :, 0] /= pretrained_window_size[0] - 1
            table[:, :, :, 1] /= pretrained_window_size[1] - 1
        else:
            table[:, :, :, 0] /= Wh - 1
            table[:, :, :, 1] /= Ww - 1
        table *= 8
        table = torch.sign(table) * torch.log2(torch.abs(table) + 1.0) / math.log2(8)
        self.register_buffer("relative_coords_table", table)

        # (N, N) index into the table for each pair of tokens i, j of a window (row-major)
        coords = torch.stack(torch.meshgrid(torch.arange(Wh), torch.arange(Ww), indexing="ij")).flatten(1)  # (2, N)
        rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0).contiguous()  # (N, N, 2)
        rel[:, :, 0] += Wh - 1
        rel[:, :, 1] += Ww - 1
        rel[:, :, 0] *= 2 * Ww - 1
        self.register_buffer("relative_position_index", rel.sum(-1))

        self.qkv = nn.Linear(dim, dim * 3, bias=False)
        if qkv_bias:
            self.q_bias = nn.Parameter(torch.zeros(dim))
            self.v_bias = nn.Parameter(torch.zeros(dim))
        else:
            self.q_bias = None
            self.v_bias = None
        self.attn_drop = nn.Dropout(attn_drop)
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(proj_drop)
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, x, mask=None):
        B_, N, C = x.shape  # (num_windows * B, ws*ws, C)
        nh = self.num_heads
        qkv_bias = None
        if self.q_bias is not None:
            qkv_bias = torch.cat((self.q_bias, torch.zeros_like(self.v_bias, requires_grad=False), self.v_bias))
        qkv = F.linear(input=x, weight=self.qkv.weight, bias=qkv_bias)
        qkv = qkv.reshape(B_, N, 3, nh, -1).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]  # (B_, nh, N, hd)

        # cosine attention, scaled per head by exp(logit_scale) clamped at 100
        attn = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1)
        logit_scale = torch.clamp(self.logit_scale, max=math.log(1.0 / 0.01)).exp()
        attn = attn * logit_scale

        bias_table = self.cpb_mlp(self.relative_coords_table).view(-1, nh)  # ((2Wh-1)(2Ww-1), nh)
        bias = bias_table[self.relative_position_index.view(-1)].view(N, N, -1)
        bias = bias.permute(2, 0, 1).contiguous()  # (nh, N, N)
        bias = 16 * torch.sigmoid(bias)
        attn = attn + bias.unsqueeze(0)

        if mask is not None:
            nW = mask.shape[0]
            attn = attn.view(B_ // nW, nW, nh, N, N) + mask.unsqueeze(1).unsqueeze(0)
            attn = attn.view(-1, nh, N, N)
        attn = self.softmax(attn)
        attn = self.attn_drop(attn)

        x = (attn @ v).transpose(1, 2).reshape(B_, N, C)
        x = self.proj(x)
        return self.proj_drop(x)


class SwinTransformerBlock(nn.Module):
    def __init__(self, dim, input_resolution, num_heads, window_size=7, shift_size=0, mlp_ratio=4.0, qkv_bias=True,
                 drop=0.0, attn_drop=0.0, drop_path=0.0, act_layer=nn.GELU, norm_layer=nn.LayerNorm,
                 pretrained_window_size=0):
        super().__init__()
        self.dim = dim
        self.input_resolution = input_resolution
        self.num_heads = num_heads
        self.window_size = window_size
        self.shift_size = shift_size
        self.mlp_ratio = mlp_ratio
        if min(self.input_resolution) <= self.window_size:
            # the map fits in one window: no shift, window = the whole map
            self.shift_size = 0
            self.window_size = min(self.input_resolution)
        assert 0 <= self.shift_size < self.window_size
        ws, s = self.window_size, self.shift_size

        self.norm1 = norm_layer(dim)
        self.attn = WindowAttention(dim, window_size=to_2tuple(ws), num_heads=num_heads, qkv_bias=qkv_bias,
                                    attn_drop=attn_drop, proj_drop=drop,
                                    pretrained_window_size=to_2tuple(pretrained_window_size))
        self.drop_path = nn.Identity()  # the drop_path rate is ignored
        self.norm2 = norm_layer(dim)
        self.mlp = Mlp(in_features=dim, hidden_features=int(dim * mlp_ratio), act_layer=act_layer, drop=drop)

        if s > 0:
            # label the 3x3 regions of the rolled map; tokens from different regions must not attend
            H, W = self.input_resolution
            img_mask = torch.zeros((1, H, W, 1))
            cnt = 0
            for h in (slice(0, -ws), slice(-ws, -s), slice(-s, None)):
                for w in (slice(0, -ws), slice(-ws, -s), slice(-s, None)):
                    img_mask[:, h, w, :] = cnt
                    cnt += 1
            mask_windows = window_partition(img_mask, ws).view(-1, ws * ws)  # (nW, N)
            attn_mask = mask_windows.unsqueeze(1) - mask_windows.unsqueeze(2)  # [w, i, j] = m[w, j] - m[w, i]
            attn_mask = attn_mask.masked_fill(attn_mask != 0, float(-100.0)).masked_fill(attn_mask == 0, float(0.0))
        else:
            attn_mask = None
        self.register_buffer("attn_mask", attn_mask)

    def forward(self, x):
        H, W = self.input_resolution
        B, L, C = x.shape
        assert L == H * W
        ws, s = self.window_size, self.shift_size

        shortcut = x
        x = x.view(B, H, W, C)  # no pre-norm in v2
        shifted_x = torch.roll(x, shifts=(-s, -s), dims=(1, 2)) if s > 0 else x
        x_windows = window_partition(shifted_x, ws).view(-1, ws * ws, C)  # (nW*B, N, C)
        attn_windows = self.attn(x_windows, mask=self.attn_mask).view(-1, ws, ws, C)
        shifted_x = window_reverse(attn_windows, ws, H, W)  # (B, H, W, C)
        x = torch.roll(shifted_x, shifts=(s, s), dims=(1, 2)) if s > 0 else shifted_x
        x = x.view(B, H * W, C)

        x = shortcut + self.drop_path(self.norm1(x))  # residual post-norm
        x = x + self.drop_path(self.norm2(self.mlp(x)))
        return x


class PatchMerging(nn.Module):
    def __init__(self, input_resolution, dim, norm_layer=nn.LayerNorm):
        super().__init__()
        self.input_resolution = input_resolution
        self.dim = dim
        self.reduction = nn.Linear(4 * dim, 2 * dim, bias=False)
        self.norm = norm_layer(2 * dim)

    def forward(self, x):
        H, W = self.input_resolution
        B, L, C = x.shape
        assert L == H * W and H % 2 == 0 and W % 2 == 0
        x = x.view(B, H, W, C)
        x0 = x[:, 0::2, 0::2, :]
        x1 = x[:, 1::2, 0::2, :]
        x2 = x[:, 0::2, 1::2, :]
        x3 = x[:, 1::2, 1::2, :]
        x = torch.cat([x0, x1, x2, x3], -1).view(B, -1, 4 * C)  # (B, H/2*W/2, 4C)
        x = self.reduction(x)  # reduce first, then normalise (the opposite of Swin-MLP's order)
        return self.norm(x)


class BasicLayer(nn.Module):
    def __init__(self, dim, input_resolution, depth, num_heads, window_size, mlp_ratio=4.0, qkv_bias=True, drop=0.0,
                 attn_drop=0.0, drop_path=0.0, norm_layer=nn.LayerNorm, downsample=None, use_checkpoint=False,
                 pretrained_window_size=0):
        super().__init__()
        self.dim = dim
        self.input_resolution = input_resolution
        self.depth = depth
        self.use_checkpoint = use_checkpoint  # stored, ignored
        blocks = []
        for i in range(depth):
            blocks.append(SwinTransformerBlock(
                dim=dim, input_resolution=input_resolution, num_heads=num_heads, window_size=window_size,
                shift_size=0 if i % 2 == 0 else window_size // 2, mlp_ratio=mlp_ratio, qkv_bias=qkv_bias,
                drop=drop, attn_drop=attn_drop, drop_path=drop_path[i] if isinstance(drop_path, list) else drop_path,
                norm_layer=norm_layer, pretrained_window_size=pretrained_window_size))
        self.blocks = nn.ModuleList(blocks)
        self.downsample = downsample(input_resolution, dim=dim, norm_layer=norm_layer) if downsample else None

    def forward(self, x):
        for blk in self.blocks:
            x = blk(x)
        if self.downsample is not None:
            x = self.downsample(x)
        return x


class PatchEmbed(nn.Module):
    def __init__(self, img_size=224, patch_size=4, in_chans=3, embed_dim=96, norm_layer=None):
        super().__init__()
        img_size = to_2tuple(img_size)
        patch_size = to_2tuple(patch_size)
        self.img_size = img_size
        self.patch_size = patch_size
        self.patches_resolution = [img_size[0] // patch_size[0], img_size[1] // patch_size[1]]
        self.num_patches = self.patches_resolution[0] * self.patches_resolution[1]
        self.in_chans = in_chans
        self.embed_dim = embed_dim
        self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=patch_size, stride=patch_size)
        self.norm = norm_layer(embed_dim) if norm_layer is not None else None

    def forward(self, x):
        x = self.proj(x).flatten(2).transpose(1, 2)  # (B, Ph*Pw, embed_dim)
        if self.norm is not None:
            x = self.norm(x)
        return x


class ModelNew(nn.Module):
    def __init__(self, img_size=224, patch_size=4, in_chans=3, num_classes=1000, embed_dim=96, depths=[2, 2, 6, 2],
                 num_heads=[3, 6, 12, 24], window_size=7, mlp_ratio=4.0, qkv_bias=True, drop_rate=0.0,
                 attn_drop_rate=0.0, drop_path_rate=0.1, norm_layer=nn.LayerNorm, patch_norm=True,
                 use_checkpoint=False, pretrained_window_sizes=[0, 0, 0, 0], **kwargs):
        super().__init__()
        self.num_classes = num_classes
        self.num_layers = len(depths)
        self.embed_dim = embed_dim
        self.patch_norm = patch_norm
        self.num_features = int(embed_dim * 2 ** (self.num_layers - 1))  # 768
        self.mlp_ratio = mlp_ratio

        self.patch_embed = PatchEmbed(img_size=img_size, patch_size=patch_size, in_chans=in_chans,
                                      embed_dim=embed_dim, norm_layer=norm_layer if self.patch_norm else None)
        res = self.patch_embed.patches_resolution
        self.patches_resolution = res
        self.pos_drop = nn.Dropout(p=drop_rate)

        # stochastic-depth rates: passed down, ignored by the blocks
        dpr = torch.linspace(0, drop_path_rate, sum(depths), device="cpu").tolist()
        self.layers = nn.ModuleList()
        for i in range(self.num_layers):
            start, end = sum(depths[:i]), sum(depths[:i + 1])
            self.layers.append(BasicLayer(
                dim=int(embed_dim * 2 ** i), input_resolution=(res[0] // 2 ** i, res[1] // 2 ** i),
                depth=depths[i], num_heads=num_heads[i], window_size=window_size, mlp_ratio=self.mlp_ratio,
                qkv_bias=qkv_bias, drop=drop_rate, attn_drop=attn_drop_rate, drop_path=dpr[start:end],
                norm_layer=norm_layer, downsample=PatchMerging if i < self.num_layers - 1 else None,
                use_checkpoint=use_checkpoint, pretrained_window_size=pretrained_window_sizes[i]))

        self.norm = norm_layer(self.num_features)
        self.avgpool = nn.AdaptiveAvgPool1d(1)
        self.head = nn.Linear(self.num_features, num_classes) if num_classes > 0 else nn.Identity()
        self.run = cudal1.CudaGraph(self.graphed)

    def forward_features(self, x):
        x = self.patch_embed(x)  # (B, 3136, 96)
        x = self.pos_drop(x)
        for layer in self.layers:
            x = layer(x)  # tokens 3136 -> 784 -> 196 -> 49, dims 96 -> 192 -> 384 -> 768
        x = self.norm(x)  # (B, 49, 768)
        x = self.avgpool(x.transpose(1, 2))  # (B, 768, 1)
        return torch.flatten(x, 1)

    def graphed(self, x):
        cudnn = torch.backends.cudnn
        tf32 = cudnn.allow_tf32
        cudnn.allow_tf32 = False  # the patch-embedding conv in true fp32, as the check requires
        try:
            return self.head(self.forward_features(x))
        finally:
            cudnn.allow_tf32 = tf32

    def forward(self, x):
        return self.run(x)  # deterministic and stateless: nothing to undo after the capture


to_2tuple = _ntuple(2)
