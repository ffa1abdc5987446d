"""The whole model in one kernel: a direct fp32 transposed convolution, 16 output channels per thread,
with + add_value, min(., 0), GELU and * multiply_value applied in registers and one write.

Eager runs the cuDNN ConvTranspose2d (32 -> 16 channels, 4x4, stride 2: output (128, 16, 66, 66),
35.7 MB) and four elementwise kernels (add, min against a 0-dim tensor, GELU, multiply), each a read
and write of that tensor: ~285 MB of traffic after the conv. Its conv uses TF32, which fails the strict
fp32 check by ~80x, and cuDNN's true-fp32 (or 3xTF32) transposed conv is slower than eager's whole
forward. Yet the conv is small: at stride 2 each
output takes 2 x 2 of the 4 x 4 taps, 4 x 32 = 128 multiply-adds per output channel, 1.1 G in all.

Output o takes input i where o + P = i * S + k, so (oh + P) % S fixes the taps kh = (oh + P) % S + S * j:
the outputs fall in S * S classes by the parity of their position, and all outputs of a class share
their taps. Each block serves one class (the class is the fastest grid index, so the blocks of the four
classes of one tile run side by side and their interleaved stride-2 stores meet in L2); its threads take
consecutive positions of that class (adjacent threads read adjacent input pixels: coalesced), and it
stages just that class's weights in shared memory as [ci][tap][channel] (32 x 4 x 16 floats, 8 KB),
read as broadcast float4s: per input channel and tap one input load, four shared loads, 16 FMAs, no
divergence. Each thread then adds the conv bias and applies the epilogue in eager's order (+ add, min
with 0 keeping NaN as torch.min does, exact erf GELU, * multiply) and writes its 16 values once. DRAM
traffic: the 16.8 MB input and the 35.7 MB output. More than 16 output channels take a grid dimension
of 16-channel chunks. Numerics: plain fp32 fmaf over (tap, ci) then + bias, erff; no TF32 (cuDNN orders
the 128 terms differently: rounding-level differences). Other settings (groups, dilation, non-square
kernel/stride/padding, weights over the shared buffer) take cuDNN with TF32 off and eager's ops.
Measured on the H200: 1.73x over eager (0.431 -> 0.249 ms); 1.79x on the H100.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1

CMAX, WMAX = 16, 4096  # output channels per thread; weights staged per block (one class, one chunk)

_k = cudal1.load_cuda(r"""
constexpr int CMAX = 16, WMAX = 4096;

__device__ __forceinline__ float epi(float v, float add, float mul) {
    v = v + add;
    v = v > 0.f ? 0.f : v;  // torch.min(x, 0): NaN stays NaN
    v = 0.5f * v * (1.f + erff(v * 0.70710678118654752f));  // F.gelu, erf form
    return v * mul;
}

// x: (B, Ci, H, W); w: (Ci, Co, K, K); y: (B, Co, OH, OW); output o takes input i where o + P = i * S + k.
// Grid (S * S * tiles, chunks of CMAX channels). Class (rh, rw) = blockIdx.x % (S * S): the outputs with
// (oh + P) % S == rh and (ow + P) % S == rw, whose taps are kh = rh + S * jh, kw = rw + S * jw (j < T).
// Its outputs are oh = oh0 + S * a, ow = ow0 + S * e with a < QH, e < QW; thread j = (b * QH + a) * QW + e.
// No __launch_bounds__(256): with it ptxas (CUDA 13) holds this kernel to 64 registers and spills; ~80 without.
extern "C" __global__ void convt_epilogue(const float* __restrict__ x,
        const float* __restrict__ w, const float* __restrict__ cb, float* __restrict__ y, int Ci, int Co,
        long long H, long long W, int K, int S, int P, long long OH, long long OW, long long QH, long long QW,
        long long n, float add, float mul) {
    __shared__ __align__(16) float ws[WMAX];  // ws[((ci * T + jh) * T + jw) * CMAX + c] = w[ci, c0 + c, kh, kw]
    const int T = (K + S - 1) / S, rh = blockIdx.x % (S * S) / S, rw = blockIdx.x % S, c0 = blockIdx.y * CMAX;
    for (int i = threadIdx.x; i < Ci * T * T * CMAX; i += blockDim.x) {
        const int c = i % CMAX, jw = i / CMAX % T, jh = i / (CMAX * T) % T, ci = i / (CMAX * T * T);
        const int kh = rh + S * jh, kw = rw + S * jw;
        ws[i] = c0 + c < Co && kh < K && kw < K ? w[(((long long)ci * Co + c0 + c) * K + kh) * K + kw] : 0.f;
    }
    __syncthreads();
    const long long j = blockIdx.x / (S * S) * (long long)blockDim.x + threadIdx.x;
    const int oh0 = ((rh - P) % S + S) % S, ow0 = ((rw - P) % S + S) % S;
    const int dh = (oh0 + P - rh) / S, dw = (ow0 + P - rw) / S;  // ih = a + dh - jh, iw = e + dw - jw
    const long long e = j % QW, a = j / QW % QH, b = j / (QW * QH);
    const long long oh = oh0 + S * a, ow = ow0 + S * e;
    if (j >= n || oh >= OH || ow >= OW) return;  // QH, QW: the largest class's extent
    float acc[CMAX];
    #pragma unroll
    for (int c = 0; c < CMAX; ++c) acc[c] = 0.f;
    for (int jh = 0; jh < T && rh + S * jh < K; ++jh) {
        const long long ih = a + dh - jh;
        if (ih < 0 || ih >= H) continue;
        for (int jw = 0; jw < T && rw + S * jw < K; ++jw) {
            const long long iw = e + dw - jw;
            if (iw < 0 || iw >= W) continue;
            const float* xp = x + (b * Ci * H + ih) * W + iw;
            const float4* wt = reinterpret_cast<const float4*>(ws + (jh * T + jw) * CMAX);
            for (int ci = 0; ci < Ci; ++ci) {
                const float xv = xp[ci * H * W];
                #pragma unroll
                for (int q = 0; q < CMAX / 4; ++q) {
                    const float4 wq = wt[ci * T * T * (CMAX / 4) + q];
                    acc[4 * q] = fmaf(xv, wq.x, acc[4 * q]);
                    acc[4 * q + 1] = fmaf(xv, wq.y, acc[4 * q + 1]);
                    acc[4 * q + 2] = fmaf(xv, wq.z, acc[4 * q + 2]);
                    acc[4 * q + 3] = fmaf(xv, wq.w, acc[4 * q + 3]);
                }
            }
        }
    }
    float* yp = y + ((b * Co + c0) * OH + oh) * OW + ow;
    #pragma unroll
    for (int c = 0; c < CMAX; ++c) {
        if (c0 + c >= Co) break;
        yp[c * OH * OW] = epi(acc[c] + cb[c0 + c], add, mul);  // conv + bias, then the epilogue
    }
}
""")


def _same(t):  # the one value of a square setting, else None
    return t[0] if len(set(t)) == 1 else None


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, add_value, multiply_value):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride)
        self.add_value = add_value
        self.multiply_value = multiply_value

    def forward(self, x):
        m = self.conv_transpose
        Ci, Co, K = m.weight.shape[:3]
        S, P, Kc = _same(m.stride), _same(m.padding), _same(m.kernel_size)
        T = -(-K // S) if S else 0  # taps per dimension of one class
        if (None in (S, P, Kc) or m.groups != 1 or m.dilation != (1, 1) or m.bias is None
                or m.padding_mode != "zeros" or Ci * T * T * CMAX > WMAX or x.dim() != 4):
            tf32 = torch.backends.cudnn.allow_tf32
            torch.backends.cudnn.allow_tf32 = False  # strict fp32: eager lets cuDNN use TF32
            x = m(x)
            torch.backends.cudnn.allow_tf32 = tf32
            return F.gelu(torch.min(x + self.add_value, torch.tensor(0.0, device=x.device))) * self.multiply_value
        x = x.contiguous()
        B, _, H, W = x.shape
        OH, OW = ((n - 1) * S - 2 * P + K + o for n, o in zip((H, W), m.output_padding))
        QH, QW = -(-OH // S), -(-OW // S)  # positions per class and dimension (the largest class)
        n = B * QH * QW
        y = x.new_empty(B, Co, OH, OW)
        grid = ((n + 255) // 256 * S * S, -(-Co // CMAX))
        _k.convt_epilogue(grid, 256, x.data_ptr(), m.weight.contiguous().data_ptr(), m.bias.data_ptr(),
                          y.data_ptr(), Ci, Co, H, W, K, S, P, OH, OW, QH, QW, n, float(self.add_value),
                          float(self.multiply_value))
        return y
