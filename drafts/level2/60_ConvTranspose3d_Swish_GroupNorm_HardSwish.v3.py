"""ConvTranspose3d as a TF32 and a bf16 cuDNN call (TF32 + bf16), then Swish, GroupNorm and HardSwish
in three CUDA kernels (two passes).

The head is the cost here. Eager's transposed conv runs on TF32 tensor cores, whose output is 22.6x
outside the strict tolerance, so a solution must match true fp32 -- and cuDNN's true-fp32 transposed
conv (3 -> 16 channels, stride 2) runs on the CUDA cores, which made the strict version 0.54x on
H200 (6.81 -> 12.67 ms), slower than eager by 5.9 ms where the three kernels move ~3 GB (~0.6 ms at
H200 bandwidth). TF32 + bf16 gets fp32 accuracy from the tensor cores at about two TF32
convolutions' work: split x = xh + xl and w = wh + wl, where xh and wh keep TF32's 10 mantissa bits
exactly and the low parts are at most 2^-10 of them; then x*w = xh*wh + xh*wl + xl*wh + xl*wl, and
only the last term (~2^-20 relative) is dropped. xh*wh runs on TF32 tensor cores, where a product of
two TF32 numbers is exact and the sums are fp32; the two cross terms, ~2^-11 of the result, run as
one bf16 convolution over twice the input channels (cat([xh, xl]) against cat([wl, wh]),
cudal1.conv_tf32_bf16), at bf16's twice-TF32 rate, where bf16's 8-bit mantissa costs ~2^-19 of the
result. 3xTF32, the same three products as one TF32 convolution over three times the channels, is
three TF32 convolutions' work.

The epilogue is unchanged. The transposed conv writes a (128, 16, 31, 63, 63) tensor, 1.0 GB. Eager
then runs sigmoid and the multiply (~3 GB of traffic), GroupNorm (a statistics pass and an apply
pass, ~3 GB) and hardswish (~2 GB): ~8 GB after the conv, ~2 ms at H200 bandwidth. Here, as in a
two-pass norm: 1. partial sums: a block per 16K-element chunk of one (sample, group) slab (its 4
channels are adjacent, so the slab is contiguous) sums swish(x) = sigmoid(x) * x and its square on
the fly; 2. one warp per slab combines its ~30 partials in double -> mean, rstd; 3. apply: a 2-D
grid (voxel block x plane, so the channel is per block) recomputes swish, normalises, applies the
channel's weight and bias and hardswish, and writes once. The conv output is read twice and the
result written once, ~3 GB instead of ~8 GB, in three launches; statistics in double are at least as
accurate as eager's. The solution of task 96 computes the same transposed conv (3 -> 16 channels,
stride 2, the same shapes) directly inside its consumer and runs its whole forward in 1.8 ms; here
GroupNorm's statistics need a pass of their own, so that route would compute the conv twice. With
3xTF32 this file measured 1.16x over eager on the H200 (6.77 -> 5.83 ms); this version is not yet
measured.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1

_k = cudal1.load_cuda(r"""
#define T 256
#define CHUNK 16384
__device__ __forceinline__ float swish(float v) { return (1.f / (1.f + expf(-v))) * v; }  // sigmoid(x) * x

// Pass 1. Block blockIdx.x handles chunk k = blockIdx.x % chunks of slab g = blockIdx.x / chunks.
extern "C" __global__ void __launch_bounds__(T) gn_partial(const float* __restrict__ x, double2* __restrict__ part,
        long long gsize, long long chunks) {
    __shared__ double2 sh[T / 32];
    const long long g = blockIdx.x / chunks, k = blockIdx.x % chunks;
    const float* xp = x + g * gsize;
    const long long end = min((k + 1) * (long long)CHUNK, gsize);
    float s1 = 0.f, s2 = 0.f;
    for (long long i = k * CHUNK + threadIdx.x; i < end; i += T) {
        const float v = swish(xp[i]);
        s1 += v;
        s2 += v * v;
    }
    double a = s1, b = s2;
    for (int o = 16; o > 0; o >>= 1) {
        a += __shfl_xor_sync(0xffffffffu, a, o);
        b += __shfl_xor_sync(0xffffffffu, b, o);
    }
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = make_double2(a, b);
    __syncthreads();
    if (threadIdx.x == 0) {
        a = b = 0.0;
        for (int i = 0; i < T / 32; ++i) { a += sh[i].x; b += sh[i].y; }
        part[blockIdx.x] = make_double2(a, b);
    }
}

// Pass 2. One warp per slab: stats[g] = (mean, rstd).
extern "C" __global__ void gn_stats(const double2* __restrict__ part, float2* __restrict__ stats,
        long long gsize, long long chunks, double eps) {
    const long long g = blockIdx.x;
    double a = 0.0, b = 0.0;
    for (long long k = threadIdx.x; k < chunks; k += 32) {
        const double2 v = part[g * chunks + k];
        a += v.x;
        b += v.y;
    }
    for (int o = 16; o > 0; o >>= 1) {
        a += __shfl_xor_sync(0xffffffffu, a, o);
        b += __shfl_xor_sync(0xffffffffu, b, o);
    }
    if (threadIdx.x == 0) {
        const double mean = a / (double)gsize, var = fmax(b / (double)gsize - mean * mean, 0.0);
        stats[g] = make_float2((float)mean, (float)(1.0 / sqrt(var + eps)));
    }
}

// Pass 3. x, y: (B, C, S); grid = (ceil(S / T), planes), blockIdx.y walks the B * C planes.
// y = hardswish(((swish(x) - mean) * rstd) * w[c] + b[c]).
extern "C" __global__ void __launch_bounds__(T) gn_apply(const float* __restrict__ x,
        const float2* __restrict__ stats, const float* __restrict__ w, const float* __restrict__ bias,
        float* __restrict__ y, long long planes, long long C, long long S, long long cpg) {
    const long long s = blockIdx.x * (long long)T + threadIdx.x;
    if (s >= S) return;
    for (long long p = blockIdx.y; p < planes; p += gridDim.y) {  // p = b * C + c
        const long long c = (unsigned)p % (unsigned)C, i = p * S + s;  // 32-bit: planes < 2^31
        const float2 st = __ldg(stats + (unsigned)p / (unsigned)cpg);  // slab b * G + c / cpg = p / cpg
        const float v = ((swish(x[i]) - st.x) * st.y) * __ldg(w + c) + __ldg(bias + c);
        y[i] = v * fminf(fmaxf(v + 3.f, 0.f), 6.f) / 6.f;  // F.hardswish
    }
}
""")
CHUNK = 16384  # elements per partial-sum block, as in the source


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, groups, eps, bias=True):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, bias=bias)
        self.group_norm = nn.GroupNorm(num_groups=groups, num_channels=out_channels, eps=eps)

    def forward(self, x):
        c = self.conv_transpose
        x = cudal1.conv_tf32_bf16(F.conv_transpose3d, x, c.weight, c.bias, stride=c.stride, padding=c.padding,
                               output_padding=c.output_padding, dilation=c.dilation).contiguous()  # (B, C, D, H, W)
        gn = self.group_norm
        B, C = x.shape[:2]
        S = x[0, 0].numel()
        if not gn.affine or x.numel() == 0:
            return F.hardswish(gn(torch.sigmoid(x) * x))
        G = gn.num_groups
        gsize = (C // G) * S  # elements of one (sample, group) slab, contiguous
        chunks = -(-gsize // CHUNK)
        ws = torch.empty(2 * B * G * chunks + B * G, device=x.device, dtype=torch.float64)  # partials, stats
        stats = ws.data_ptr() + 16 * B * G * chunks  # B * G float2 after the double2 partials
        y = torch.empty_like(x)
        _k.gn_partial(B * G * chunks, 256, x.data_ptr(), ws.data_ptr(), gsize, chunks)
        _k.gn_stats(B * G, 32, ws.data_ptr(), stats, gsize, chunks, float(gn.eps))
        _k.gn_apply(((S + 255) // 256, min(B * C, 65535)), 256, x.data_ptr(), stats, gn.weight.data_ptr(),
                    gn.bias.data_ptr(), y.data_ptr(), B * C, C, S, C // G)
        return y
