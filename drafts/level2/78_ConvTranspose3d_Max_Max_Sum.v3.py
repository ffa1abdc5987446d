"""ConvTranspose3d as a TF32 and a bf16 cuDNN call (TF32 + bf16), then both max pools and the channel
sum in one CUDA kernel.

The head is the cost here. Eager's transposed conv runs on TF32 tensor cores, and its output passes
the strict tolerance only narrowly (0.9 of it): too thin a margin to rely on, so a solution matches
true fp32 -- and cuDNN's true-fp32 transposed conv runs on the CUDA cores, which made the strict
version 0.42x on H200 (0.69 -> 1.63 ms) while the fused kernel below reads at most the 126 MB conv
output (~0.03 ms at H200 bandwidth). TF32 + bf16 gets fp32 accuracy from the tensor cores at about
two TF32 convolutions' work: split x = xh + xl and w = wh + wl, where xh and wh keep TF32's 10
mantissa bits exactly and the low parts are at most 2^-10 of them; then x*w = xh*wh + xh*wl + xl*wh
+ xl*wl, and only the last term (~2^-20 relative) is dropped. xh*wh runs on TF32 tensor cores, where
a product of two TF32 numbers is exact and the sums are fp32; the two cross terms, ~2^-11 of the
result, run as one bf16 convolution over twice the input channels (cat([xh, xl]) against cat([wl,
wh]), cudal1.conv_tf32_bf16), at bf16's twice-TF32 rate, where bf16's 8-bit mantissa costs ~2^-19 of
the result. 3xTF32, the same three products as one TF32 convolution over three times the channels,
is three TF32 convolutions' work.

The epilogue is unchanged. The ConvTranspose3d output is (16, 16, 31, 63, 63): 31.5M floats, 126 MB.
Eager then runs MaxPool3d(2) (read 126 MB, write a 15.6 MB temporary), MaxPool3d(3) (read it, write
0.5 MB) and the sum over channels (read, write 32 KB). Two floor-mode max pools without padding
compose into one: the output at (d, h, w) of pool(3) after pool(2) is the max of the 6x6x6 block of
the conv output at 6 * (d, h, w). Here one warp per output position (n, d, h, w) walks the 16
channels; for each, its 32 lanes cover the 216 values of the block (NaN propagates, as in torch's
max pool), a shuffle reduction gives the max, and lane 0 adds it to the channel sum. The 15.6 MB
temporary and two launches go away, and the conv output is read once, only the part the pools can
reach (30 x 60 x 60 of 31 x 63 x 63). The maxima are exact; only the 16-term sum may round
differently. With 3xTF32 this file measured 0.63x over eager on the H200 (0.718 -> 1.15 ms); this
version is not yet measured.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1

_k = cudal1.load_cuda(r"""
__device__ __forceinline__ float nanmax(float a, float b) { return (a > b || a != a) ? a : b; }

// Warp per output (n, od, oh, ow) of (N, 1, OD, OH, OW): sum over c of the max of the K^3 block
// of x (N, C, D, H, W) at K * (od, oh, ow).
extern "C" __global__ void maxpool_chansum(const float* __restrict__ x, float* __restrict__ y, long long C,
        long long D, long long H, long long W, long long OD, long long OH, long long OW, long long K,
        long long n) {
    const long long i = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (i >= n) return;  // whole warps exit together
    const long long ow = i % OW, oh = i / OW % OH, od = i / (OW * OH) % OD, b = i / (OW * OH * OD);
    const long long KK = K * K, K3 = KK * K;
    float sum = 0.f;
    for (long long c = 0; c < C; ++c) {
        const float* xb = x + (((b * C + c) * D + od * K) * H + oh * K) * W + ow * K;
        float m = -INFINITY;
        for (long long e = lane; e < K3; e += 32) m = nanmax(xb[(e / KK * H + e / K % K) * W + e % K], m);
        for (int o = 16; o > 0; o >>= 1) m = nanmax(__shfl_xor_sync(0xffffffffu, m, o), m);
        sum += m;
    }
    if (lane == 0) y[i] = sum;
}
""")


def _pool_k(p):  # kernel size of a default MaxPool3d (stride = kernel, no padding), else None
    k = p.kernel_size
    ok = isinstance(k, int) and p.stride in (k, (k,) * 3) and p.padding in (0, (0,) * 3) \
        and p.dilation in (1, (1,) * 3) and not p.ceil_mode
    return k if ok else None


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride, padding=padding)
        self.max_pool1 = nn.MaxPool3d(kernel_size=2)
        self.max_pool2 = nn.MaxPool3d(kernel_size=3)

    def forward(self, x):
        m = self.conv_transpose
        c = cudal1.conv_tf32_bf16(F.conv_transpose3d, x, m.weight, m.bias, stride=m.stride, padding=m.padding,
                               output_padding=m.output_padding, dilation=m.dilation).contiguous()  # (B, C, D, H, W)
        k1, k2 = _pool_k(self.max_pool1), _pool_k(self.max_pool2)
        if k1 is None or k2 is None:
            return torch.sum(self.max_pool2(self.max_pool1(c)), dim=1, keepdim=True)
        B, C, D, H, W = c.shape
        OD, OH, OW = D // k1 // k2, H // k1 // k2, W // k1 // k2
        y = torch.empty(B, 1, OD, OH, OW, device=c.device, dtype=c.dtype)
        n = y.numel()
        _k.maxpool_chansum((n * 32 + 255) // 256, 256, c.data_ptr(), y.data_ptr(), C, D, H, W, OD, OH, OW, k1 * k2, n)
        return y
