"""The whole model in one kernel, a block per sample: a thread per output pixel computes the direct
3x3 conv for all 16 output channels and their GELU, and the block reduces the 16 channel sums into
the sample's 16 means.

Eager runs three kernels: the cuDNN Conv2d (3 -> 16 channels, output (128, 16, 30, 30), 7.4 MB),
whose implicit GEMM is badly shaped here (N = 16 output channels, K = 27 taps), F.gelu (a read and
write of 7.4 MB) and adaptive_avg_pool2d (reads it again), around a conv of only 50M
multiply-adds. The library file already fuses it into one kernel with a block per (sample, channel)
plane: each of 2048 blocks copies its sample (3 x 32 x 32 floats, 12 KB) and filter into shared
memory, waits at a barrier, then each thread computes ~4 outputs of that one channel at a shared
input load and a shared weight load per FMA; every sample is staged 16 times (24 MB of L2 reads
for 1.5 MB of input). Here block b (900 pixels rounded up to 928 threads) gives one thread to each
output pixel of sample b: it loads its 27 input values once, straight from global memory (adjacent
threads read adjacent pixels: coalesced, mostly L1 hits), and multiplies each into 16 channel
accumulators, with the weights staged in shared memory as [tap][channel] and read as broadcast
float4s: 27 global loads and 108 shared loads feed 432 FMAs, and the 16 independent accumulators
give ILP. Each channel gets + bias and GELU in registers; the block then sums the 16 channels at
once: a transposing warp sum (16 shuffles for the 16 channel sums, lane l ending with channel
l & 15), then the warps' partials added in a fixed order in double by 16 threads, and y[b, c] =
sum / (OH * OW). One launch, 1.5 MB read and 8 KB written, as in the library: the gain is the
kernel's own time. 128 blocks of 29 warps fill 128 of the 132 SMs in a single wave (at most 64
registers a thread). Numerics: plain fp32 fmaf over the taps in (ci, kh, kw) order, then + bias
(cuDNN orders the 27 terms differently: rounding-level differences), the erf-form GELU 0.5 v (1 +
erf(v / sqrt 2)) as F.gelu writes it; warp sums in fp32 (32 terms), the cross-warp sums in double:
bitwise reproducible, no TF32. Other configs (planes over 1024 pixels, more than 16 channels,
stride, padding, dilation, groups, non-square kernels, unbatched input) take cuDNN with TF32 off and
eager's ops. Measured on the H200: 3.12x over eager (0.352 -> 0.113 ms); 2.57x on the H100.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1

CMAX, WMAX, TMAX = 16, 1024, 1024  # channels per thread; weights in shared memory (CMAX per tap); threads per block

_k = cudal1.load_cuda(r"""
constexpr int CMAX = 16, WMAX = 1024, TMAX = 1024;

// One step of a transposing warp sum over d[0..2M): a lane keeps the half of its values picked by bit M of
// its lane id (moved to d[0..M)) and adds its partner's copy of that half. After the steps 8, 4, 2, 1 lane l
// holds its half-warp's sum of d[l & 15] in d[0], in a fixed order. A template, so d stays in registers.
template <int M> __device__ __forceinline__ void half_sum(float* d) {
    const bool hi = threadIdx.x & M;
    #pragma unroll
    for (int i = 0; i < M; ++i) {
        const float send = hi ? d[i] : d[i + M];
        d[i] = (hi ? d[i + M] : d[i]) + __shfl_xor_sync(0xffffffffu, send, M);
    }
}

// x: (B, Ci, H, W); w: (Co, Ci, K, K), stride 1, no padding; y: (B, Co) = mean over (oh, ow) of gelu(conv + cb).
// Block b = sample b, thread p = output pixel p < P = OH * OW (blockDim = P rounded up to 32 lanes).
extern "C" __global__ void __launch_bounds__(TMAX) conv_gelu_mean(const float* __restrict__ x,
        const float* __restrict__ w, const float* __restrict__ cb, float* __restrict__ y, int Ci, int Co,
        long long H, long long W, int K, int OW, int P) {
    __shared__ __align__(16) float ws[WMAX];  // ws[t * CMAX + c] = w[c, t] (t = (ci * K + kh) * K + kw), 0 for c >= Co
    __shared__ float bs[CMAX];                // conv bias, 0 for c >= Co
    __shared__ float red[TMAX / 32 * CMAX];   // red[warp * CMAX + c]: the warps' partial sums
    const int taps = Ci * K * K;
    for (int i = threadIdx.x; i < taps * CMAX; i += blockDim.x) {
        const int t = i / CMAX, c = i % CMAX;
        ws[i] = c < Co ? w[(long long)c * taps + t] : 0.f;
    }
    if (threadIdx.x < CMAX) bs[threadIdx.x] = (int)threadIdx.x < Co ? cb[threadIdx.x] : 0.f;
    __syncthreads();
    const long long b = blockIdx.x;
    const int p = threadIdx.x, oh = p / OW, ow = p % OW;
    float v[CMAX], d[CMAX];  // d[c] = gelu(v[c]), 0 past the plane: no early return, all take part below
    #pragma unroll
    for (int c = 0; c < CMAX; ++c) v[c] = 0.f;
    if (p < P) {
        int t = 0;
        for (int ci = 0; ci < Ci; ++ci)
            for (int kh = 0; kh < K; ++kh) {
                const float* xp = x + ((b * Ci + ci) * H + oh + kh) * W + ow;
                for (int kw = 0; kw < K; ++kw, ++t) {
                    const float xv = xp[kw];
                    const float4* wt = reinterpret_cast<const float4*>(ws + t * CMAX);
                    #pragma unroll
                    for (int q = 0; q < CMAX / 4; ++q) {
                        const float4 wq = wt[q];
                        v[4 * q] = fmaf(xv, wq.x, v[4 * q]);
                        v[4 * q + 1] = fmaf(xv, wq.y, v[4 * q + 1]);
                        v[4 * q + 2] = fmaf(xv, wq.z, v[4 * q + 2]);
                        v[4 * q + 3] = fmaf(xv, wq.w, v[4 * q + 3]);
                    }
                }
            }
    }
    #pragma unroll
    for (int c = 0; c < CMAX; ++c) {
        const float u = v[c] + bs[c];                                             // conv
        d[c] = p < P ? 0.5f * u * (1.f + erff(u * 0.70710678118654752f)) : 0.f;  // F.gelu, erf form
    }
    half_sum<8>(d); half_sum<4>(d); half_sum<2>(d); half_sum<1>(d);
    d[0] += __shfl_xor_sync(0xffffffffu, d[0], 16);  // lane l: the warp's sum of channel l & 15
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane < CMAX) red[warp * CMAX + lane] = d[0];
    __syncthreads();
    if ((int)threadIdx.x < Co) {
        double s = 0.0;
        for (int wp = 0; wp < (int)(blockDim.x >> 5); ++wp) s += red[wp * CMAX + threadIdx.x];
        y[b * Co + threadIdx.x] = (float)(s / (double)P);  // adaptive_avg_pool2d(1): the plane's mean
    }
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        c = self.conv
        Co, Ci, K = c.weight.shape[:3]
        P = (x.shape[-2] - K + 1) * (x.shape[-1] - K + 1) if x.dim() == 4 else 0  # pixels per plane
        if (c.stride != (1, 1) or c.padding != (0, 0) or c.dilation != (1, 1) or c.groups != 1 or c.bias is None
                or c.padding_mode != "zeros" or c.kernel_size != (K, K) or Co > CMAX or Ci * K * K * CMAX > WMAX
                or x.dim() != 4 or min(x.shape[2:]) < K or P > TMAX):
            tf32 = torch.backends.cudnn.allow_tf32
            torch.backends.cudnn.allow_tf32 = False  # strict fp32: eager lets cuDNN use TF32
            try:
                x = c(x)
            finally:
                torch.backends.cudnn.allow_tf32 = tf32
            return F.adaptive_avg_pool2d(F.gelu(x), 1).squeeze(-1).squeeze(-1)
        x = x.contiguous()
        B, _, H, W = x.shape
        y = x.new_empty(B, Co)
        if B > 0:
            _k.conv_gelu_mean(B, (P + 31) // 32 * 32, x.data_ptr(), c.weight.contiguous().data_ptr(),
                              c.bias.data_ptr(), y.data_ptr(), Ci, Co, H, W, K, W - K + 1, P)
        return y
