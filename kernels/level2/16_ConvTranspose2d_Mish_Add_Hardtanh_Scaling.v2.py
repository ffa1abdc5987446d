"""The whole model in one kernel: a direct fp32 transposed convolution, 16 output channels per thread,
with Mish, + add_value, Hardtanh and * scale applied in registers and one write.

Eager runs the cuDNN ConvTranspose2d (32 -> 64 channels, 4x4, stride 2, padding 1, output_padding 1:
output (128, 64, 33, 33), 35.7 MB), then Mish, the add, Hardtanh and the multiply, each a read and write
of that tensor: ~290 MB of traffic after the conv. Its conv uses TF32, which fails the strict fp32 check,
and cuDNN's true-fp32 transposed conv costs more than a fused epilogue saves: cuDNN's conv plus a
fused epilogue runs slower than eager. Yet the conv is small: at stride 2 each output takes
2 x 2 of the 4 x 4 taps, 4 x 32 = 128 multiply-adds per output channel, 1.1 G in all.

Output o takes input i where o + P = i * S + k, so (oh + P) % S fixes the taps kh = (oh + P) % S + S * j:
the outputs fall in S * S classes by the parity of their position, and all outputs of a class share
their taps. Each block serves one class and one chunk of 16 output channels (grid: class fastest, so
the blocks of the four classes of one tile run side by side and their interleaved stride-2 stores meet
in L2; chunks of 16 keep 16 accumulators per thread where 64 would cut occupancy); its threads take
consecutive positions of that class (adjacent threads read adjacent input pixels: coalesced), and it
stages just that class's and chunk's weights in shared memory as [ci][tap][channel] (32 x 4 x 16 floats,
8 KB), read as broadcast float4s: per input channel and tap one input load, four shared loads, 16 FMAs,
no divergence. Each thread adds the conv bias and applies the epilogue in eager's order --
mish(v) = v * tanh(log1p(exp(v))) as torch's kernel writes it, + add, hardtanh(-1, 1) keeping NaN,
* scale -- and writes its 16 values once. DRAM traffic: the 4.2 MB input (read by the four chunks,
mostly from L2) and the 35.7 MB output. Numerics: plain fp32 fmaf over (tap, ci) then + bias, expf,
log1pf, tanhf; no TF32 (cuDNN orders the 128 terms differently: rounding-level differences). Other
settings (groups, dilation, non-square kernel/stride/padding, weights over the shared buffer) take cuDNN
with TF32 off and eager's ops. The task's 33 x 33 output is odd, so the classes differ in size; each
takes the largest class's extent and ~6% of the threads exit at once.
Measured on the H200: 1.96x over eager (0.528 -> 0.269 ms); 1.49x on the H100.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1

CMAX, WMAX = 16, 4096  # output channels per thread; weights staged per block (one class, one chunk)

_k = cudal1.load_cuda(r"""
constexpr int CMAX = 16, WMAX = 4096;

__device__ __forceinline__ float epi(float v, float add, float scale) {
    v = v * tanhf(log1pf(expf(v))) + add;         // F.mish (torch's formula), then + add_value
    v = v != v ? v : fminf(fmaxf(v, -1.f), 1.f);  // F.hardtanh(-1, 1): NaN stays NaN
    return v * scale;
}

// x: (B, Ci, H, W); w: (Ci, Co, K, K); y: (B, Co, OH, OW); output o takes input i where o + P = i * S + k.
// Grid (S * S * tiles, chunks of CMAX channels). Class (rh, rw) = blockIdx.x % (S * S): the outputs with
// (oh + P) % S == rh and (ow + P) % S == rw, whose taps are kh = rh + S * jh, kw = rw + S * jw (j < T).
// Its outputs are oh = oh0 + S * a, ow = ow0 + S * e with a < QH, e < QW; thread j = (b * QH + a) * QW + e.
// No __launch_bounds__(256): with it ptxas (CUDA 13) holds this kernel to 64 registers and spills; ~80 without.
extern "C" __global__ void convt_epilogue(const float* __restrict__ x,
        const float* __restrict__ w, const float* __restrict__ cb, float* __restrict__ y, int Ci, int Co,
        long long H, long long W, int K, int S, int P, long long OH, long long OW, long long QH, long long QW,
        long long n, float add, float scale) {
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
        yp[c * OH * OW] = epi(acc[c] + cb[c0 + c], add, scale);  // conv + bias, then the epilogue
    }
}
""")


def _same(t):  # the one value of a square setting, else None
    return t[0] if len(set(t)) == 1 else None


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, add_value, scale):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride, padding, output_padding)
        self.add_value = add_value
        self.scale = scale

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
            return F.hardtanh(F.mish(x) + self.add_value, min_val=-1, max_val=1) * self.scale
        x = x.contiguous()
        B, _, H, W = x.shape
        OH, OW = ((n - 1) * S - 2 * P + K + o for n, o in zip((H, W), m.output_padding))
        QH, QW = -(-OH // S), -(-OW // S)  # positions per class and dimension (the largest class)
        n = B * QH * QW
        y = x.new_empty(B, Co, OH, OW)
        grid = ((n + 255) // 256 * S * S, -(-Co // CMAX))
        _k.convt_epilogue(grid, 256, x.data_ptr(), m.weight.contiguous().data_ptr(), m.bias.data_ptr(),
                          y.data_ptr(), Ci, Co, H, W, K, S, P, OH, OW, QH, QW, n, float(self.add_value),
                          float(self.scale))
        return y
