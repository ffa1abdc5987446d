"""The whole model in two kernels: a direct 3x3x3 convolution, 16 output channels per thread, with
hardswish, relu and the channel softmax in registers and the spatial mean as a block reduction.

Eager runs the cuDNN Conv3d (implicit GEMM with K = 3 * 27 = 81 and N = 16: a badly shaped GEMM) and
writes its (128, 16, 14, 30, 30) output (103 MB), then hardswish, relu and the softmax over dim 1
(each a full read and write of 103 MB) and the mean over dims 2-4 (one more read): ~720 MB of DRAM
traffic and five launches after the conv. Here one thread per output position (sample, d, h, w)
loads its 81 input values once (adjacent threads read adjacent pixels: coalesced) and multiplies
each into 16 channel accumulators with weights staged in shared memory as [tap][channel], read as
broadcast float4s; it adds the conv bias, applies hardswish and relu, and takes the softmax over the
16 channels (minus the max, exp, divided by the sum, as torch does). The mean over space is a
reduction: the blocks of one sample each sum their threads' probabilities per channel (warp shuffles,
then the 8 warps in a fixed order) into a per-block partial, and a second tiny kernel adds a
sample's partials in block order (in double) and divides by the number of positions. The conv output
is never stored: DRAM traffic is the 25 MB input and ~400 KB of partials; the kernel is FMA-bound
(~4 GFLOP of plain fp32, no TF32). Deterministic: no atomics, every sum in a fixed order. Numerics:
the sums run in another order than eager's; the outputs are ~1/16 and each is a mean of 12,600
positive terms, so the difference is ~1e-7 relative. Other settings (more than 16 channels, stride,
padding, dilation, groups, no bias) take cuDNN with TF32 off and eager's ops.
Measured on the H200: 2.76x over eager (1.02 -> 0.368 ms); 2.96x on the H100.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1

CMAX, WMAX = 16, 2048  # output channels per thread; weights staged in shared memory (CMAX per tap)

_k = cudal1.load_cuda(r"""
constexpr int CMAX = 16, WMAX = 2048;

// x: (B, Ci, D, H, W); w: (Co, Ci, K, K, K), stride 1, no padding. Block j covers positions
// (j % bps) * 256 + threadIdx.x of sample j / bps (P = OD * OH * OW positions per sample);
// part[j * CMAX + c] = sum over its positions of softmax_c(relu(hardswish(conv + bias))).
// No __launch_bounds__(256): with it nvcc 13 caps this kernel at 64 registers and spills; without, 59, no spills.
extern "C" __global__ void conv3d_softmax_sum(const float* __restrict__ x,
        const float* __restrict__ w, const float* __restrict__ cb, float* __restrict__ part, int Ci, int Co,
        long long D, long long H, long long W, int K, long long OD, long long OH, long long OW, int bps) {
    __shared__ __align__(16) float ws[WMAX];  // ws[t * CMAX + c] = w[c, t] (t = ci * K^3 + tap), 0 for c >= Co
    __shared__ float red[8][CMAX];            // per-warp channel sums
    const int K3 = K * K * K, taps = Ci * K3;
    for (int i = threadIdx.x; i < taps * CMAX; i += blockDim.x) {
        const int t = i / CMAX, c = i % CMAX;
        ws[i] = c < Co ? w[(long long)c * taps + t] : 0.f;
    }
    __syncthreads();
    const long long b = blockIdx.x / bps, p = (long long)(blockIdx.x % bps) * blockDim.x + threadIdx.x;
    float prob[CMAX];
    #pragma unroll
    for (int c = 0; c < CMAX; ++c) prob[c] = 0.f;  // past the sample's end: adds nothing
    if (p < OD * OH * OW) {
        const long long ow = p % OW, oh = p / OW % OH, od = p / (OW * OH);
        float acc[CMAX];
        #pragma unroll
        for (int c = 0; c < CMAX; ++c) acc[c] = 0.f;
        int t = 0;
        for (int ci = 0; ci < Ci; ++ci)
            for (int kd = 0; kd < K; ++kd)
                for (int kh = 0; kh < K; ++kh) {
                    const float* xp = x + (((b * Ci + ci) * D + od + kd) * H + oh + kh) * W + ow;
                    for (int kw = 0; kw < K; ++kw, ++t) {
                        const float xv = xp[kw];
                        const float4* wt = reinterpret_cast<const float4*>(ws + t * CMAX);
                        #pragma unroll
                        for (int q = 0; q < CMAX / 4; ++q) {
                            const float4 wq = wt[q];
                            acc[4 * q] = fmaf(xv, wq.x, acc[4 * q]);
                            acc[4 * q + 1] = fmaf(xv, wq.y, acc[4 * q + 1]);
                            acc[4 * q + 2] = fmaf(xv, wq.z, acc[4 * q + 2]);
                            acc[4 * q + 3] = fmaf(xv, wq.w, acc[4 * q + 3]);
                        }
                    }
                }
        float mx = -INFINITY, s = 0.f;
        #pragma unroll
        for (int c = 0; c < CMAX; ++c) if (c < Co) {
            float v = acc[c] + cb[c];
            v = v * fminf(fmaxf(v + 3.f, 0.f), 6.f) / 6.f;  // F.hardswish
            acc[c] = v = v < 0.f ? 0.f : v;                 // torch.relu; NaN stays NaN
            mx = fmaxf(mx, v);                              // a NaN still reaches every exp below
        }
        #pragma unroll
        for (int c = 0; c < CMAX; ++c) if (c < Co) { acc[c] = expf(acc[c] - mx); s += acc[c]; }
        #pragma unroll
        for (int c = 0; c < CMAX; ++c) if (c < Co) prob[c] = acc[c] / s;  // torch.softmax(dim=1)
    }
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    #pragma unroll
    for (int c = 0; c < CMAX; ++c) {
        float a = prob[c];
        for (int o = 16; o > 0; o >>= 1) a += __shfl_xor_sync(0xffffffffu, a, o);
        if (lane == 0) red[warp][c] = a;
    }
    __syncthreads();
    if (threadIdx.x < Co) {
        float a = 0.f;
        for (int i = 0; i < (int)(blockDim.x >> 5); ++i) a += red[i][threadIdx.x];  // fixed warp order
        part[(long long)blockIdx.x * CMAX + threadIdx.x] = a;
    }
}

// y[b, c] = (sum of the bps partials of sample b, in block order) / P; one thread per (b, c).
extern "C" __global__ void mean_finish(const float* __restrict__ part, float* __restrict__ y, int Co, int bps,
        long long P, long long n) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    const long long b = i / Co, c = i % Co;
    double s = 0.0;
    for (int j = 0; j < bps; ++j) s += part[(b * bps + j) * CMAX + c];
    y[i] = (float)(s / (double)P);
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias=True):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size, bias=bias)

    def forward(self, x):
        c = self.conv
        Co, Ci, K = c.weight.shape[:3]
        B, _, D, H, W = x.shape
        P = (D - K + 1) * (H - K + 1) * (W - K + 1)  # output positions per sample
        if (c.stride != (1, 1, 1) or c.padding != (0, 0, 0) or c.dilation != (1, 1, 1) or c.groups != 1
                or c.bias is None or c.padding_mode != "zeros" or len(set(c.kernel_size)) != 1 or Co > CMAX
                or Ci * K ** 3 * CMAX > WMAX or min(D, H, W) < K):
            tf32 = torch.backends.cudnn.allow_tf32
            torch.backends.cudnn.allow_tf32 = False  # strict fp32: eager lets cuDNN use TF32
            x = c(x)
            torch.backends.cudnn.allow_tf32 = tf32
            return torch.mean(torch.softmax(torch.relu(F.hardswish(x)), dim=1), dim=[2, 3, 4])
        x = x.contiguous()
        bps = (P + 255) // 256  # blocks per sample: a block never straddles two samples
        part = x.new_empty(B * bps, CMAX)  # (blocks, CMAX) per-block channel sums
        y = x.new_empty(B, Co)
        _k.conv3d_softmax_sum(B * bps, 256, x.data_ptr(), c.weight.data_ptr(), c.bias.data_ptr(), part.data_ptr(),
                              Ci, Co, D, H, W, K, D - K + 1, H - K + 1, W - K + 1, bps)
        _k.mean_finish((B * Co + 255) // 256, 256, part.data_ptr(), y.data_ptr(), Co, bps, P, B * Co)
        return y
