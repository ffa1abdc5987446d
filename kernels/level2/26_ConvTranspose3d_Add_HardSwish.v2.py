"""The whole model in one kernel: a direct fp32 transposed convolution, 16 output channels per thread,
with the add of the second input and y * hardswish(y) applied in registers and one write.

Eager runs the ConvTranspose3d (32 -> 64 channels, 3x3x3, stride 2, padding 1, output padding 1:
output (128, 64, 32, 32, 32), 1.07 GB) on TF32 tensor cores, whose result misses the strict fp32
check, then the add (reads 2.1 GB, writes 1.07 GB), hardswish and the multiply (each reads and writes
the 1.07 GB tensor again): ~8.6 GB of traffic after the conv, ~4.1 ms in all. A strict-fp32 solution
cannot just call cuDNN: its true-fp32 transposed conv runs on the CUDA cores at ~2.6x eager's time, and
3xTF32 (three TF32 products in one call) left the library's version at 1.12x. With stride 2 an output
position takes, per dimension, only the taps k with k = o + P (mod 2) -- 1 or 2 of 3 -- so 3.4 taps x
32 input channels = 108 multiply-adds per output value, 29 G in all: ~2-2.9 ms at the 20-30 TFLOPS a
CUDA-core direct conv reaches. The traffic that must move is the 1.07 GB add_input read and the 1.07 GB
output written once (~0.45 ms at 4.8 TB/s), so the kernel is compute-bound and estimated 1.4-2x eager.

The outputs split into 8 parity classes (o mod 2 per dimension); all positions of a class share one tap
set. A block serves one class of one sample and one chunk of 16 output channels (class and chunk are
part of the block index): it stages only that class's weights for its chunk (at most 2 x 2 x 2 taps x
32 input channels x 16 channels, 16 KB) in shared memory as [input channel][tap][channel], read as
broadcast float4s, and its threads take the class's positions row by row, so a warp's threads share
their taps (no divergence) and read adjacent input pixels (coalesced). Each thread accumulates its
position's 16 channels, adds the conv bias, then add_input, then y * hardswish(y), and writes each
channel once. The class is the fastest block index, so the 8 blocks that fill one region's interleaved
(stride-2) positions run together and L2 merges their sectors; the chunk comes next, so the 4 chunks
read the same input while it is in L1/L2.

Numerics: plain fp32 FMAs, no TF32; only the order of the 108-term sums differs from cuDNN's; then
+ bias, + add_input and hardswish as torch rounds them (y * min(max(y + 3, 0), 6) / 6). The task's
unused `bias` parameter is kept so the state dict matches. Other settings (groups, dilation, non-cubic
kernel/stride/padding, more taps than the shared buffer holds, an add_input that broadcasts, a sample
past 2^31 elements) take torch's ops with cuDNN's TF32 off.
Measured on the H200: 0.97x over eager (4.09 -> 4.22 ms); 1.25x on the H100.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1

CMAX, WMAX = 16, 8192  # output channels per thread (one chunk); weights staged in shared memory (CMAX per tap)

_k = cudal1.load_cuda(r"""
constexpr int CMAX = 16, WMAX = 8192;

// Block = ((b * nblk + blk) * nchunk + chunk) * S^3 + cls: channels c0 = chunk * 16 .. c0 + 15 at the
// positions of parity class cls = (rd, rh, rw) of sample b; the class's j-th position (j = blk * 256 +
// thread) is o = S * (jd, jh, jw) + (rd, rh, rw) over an (Nd, Nh, Nw) grid. x: (B, Ci, D, H, W);
// w: (Ci, Co, K, K, K); a, y: (B, Co, OD, OH, OW). Output o takes input i where z = o + P = i * S + k, so
// the class's taps per dimension are k = z mod S + S * t, from input z / S - t.
extern "C" __global__ void __launch_bounds__(256) convt_add_hswish(const float* __restrict__ x,
        const float* __restrict__ w, const float* __restrict__ bias, const float* __restrict__ add,
        float* __restrict__ y, int Ci, int Co, int D, int H, int W, int K, int S, int P, int OD, int OH, int OW,
        int Nd, int Nh, int Nw, int nblk, int nchunk) {
    __shared__ __align__(16) float ws[WMAX];  // ws[(ci * nt + t) * CMAX + c] = w[ci, c0 + c, tap t], 0 past Co
    const int S3 = S * S * S, cls = blockIdx.x % S3, c0 = blockIdx.x / S3 % nchunk * CMAX;
    const int rd = cls / (S * S), rh = cls / S % S, rw = cls % S;
    const int kd0 = (rd + P) % S, kh0 = (rh + P) % S, kw0 = (rw + P) % S;  // first tap per dimension
    const int nkd = (K - kd0 + S - 1) / S, nkh = (K - kh0 + S - 1) / S, nkw = (K - kw0 + S - 1) / S;
    const int nt = nkd * nkh * nkw, K3 = K * K * K;
    for (int i = threadIdx.x; i < Ci * nt * CMAX; i += blockDim.x) {
        const int c = i % CMAX, t = i / CMAX % nt, ci = i / (CMAX * nt);
        const int tap = ((kd0 + t / (nkh * nkw) * S) * K + kh0 + t / nkw % nkh * S) * K + kw0 + t % nkw * S;
        ws[i] = c0 + c < Co ? w[((long long)ci * Co + c0 + c) * K3 + tap] : 0.f;
    }
    __syncthreads();
    // per-sample sizes fit int (checked by the caller); only the sample offsets need 64 bits
    const int blk = blockIdx.x / (S3 * nchunk) % nblk, j = blk * blockDim.x + threadIdx.x;
    const long long b = blockIdx.x / (S3 * nchunk) / nblk;
    const int od = j / (Nh * Nw) * S + rd, oh = j / Nw % Nh * S + rh, ow = j % Nw * S + rw;
    if (j >= Nd * Nh * Nw || od >= OD || oh >= OH || ow >= OW) return;
    float acc[CMAX];
    #pragma unroll
    for (int c = 0; c < CMAX; ++c) acc[c] = 0.f;
    const int DHW = D * H * W, id0 = (od + P) / S, ih0 = (oh + P) / S, iw0 = (ow + P) / S;
    const float* xb = x + b * Ci * DHW;
    for (int a = 0; a < nkd && a <= id0; ++a) {  // input id0 - a >= 0
        if (id0 - a >= D) continue;
        for (int e = 0; e < nkh && e <= ih0; ++e) {
            if (ih0 - e >= H) continue;
            for (int f = 0; f < nkw && f <= iw0; ++f) {
                if (iw0 - f >= W) continue;
                const float* xp = xb + ((id0 - a) * H + ih0 - e) * W + iw0 - f;
                const float4* wt = reinterpret_cast<const float4*>(ws + ((a * nkh + e) * nkw + f) * CMAX);
                for (int ci = 0; ci < Ci; ++ci, xp += DHW, wt += nt * (CMAX / 4)) {
                    const float xv = *xp;
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
        }
    }
    const int plane = OD * OH * OW;
    const long long o = (b * Co + c0) * plane + (od * OH + oh) * OW + ow;
    #pragma unroll
    for (int c = 0; c < CMAX; ++c) {
        if (c0 + c < Co) {
            const float v = acc[c] + bias[c0 + c] + add[o + (long long)c * plane];  // conv, then + add_input
            y[o + (long long)c * plane] = v * (v * fminf(fmaxf(v + 3.f, 0.f), 6.f) / 6.f);  // v * hardswish(v)
        }
    }
}
""")


def _same(t):  # the one value of a cubic setting, else None
    return t[0] if len(set(t)) == 1 else None


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, bias_shape):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.bias = nn.Parameter(torch.randn(bias_shape))  # unused in forward, as in the task

    def forward(self, x, add_input):
        m = self.conv_transpose
        Ci, Co, K = m.weight.shape[:3]
        S, P, Kc = _same(m.stride), _same(m.padding), _same(m.kernel_size)
        ok = (None not in (S, P, Kc) and m.groups == 1 and m.dilation == (1, 1, 1) and m.bias is not None
              and m.padding_mode == "zeros" and Ci * (-(-K // S)) ** 3 * CMAX <= WMAX and x.dim() == 5)
        if ok:  # the output (B, Co, OD, OH, OW); the kernel indexes a sample's input and output in int
            OD, OH, OW = ((n - 1) * S - 2 * P + K + o for n, o in zip(x.shape[2:], m.output_padding))
            ok = (tuple(add_input.shape) == (x.shape[0], Co, OD, OH, OW) and x[0].numel() < 2 ** 31
                  and Co * OD * OH * OW < 2 ** 31)
        if not ok:
            tf32 = torch.backends.cudnn.allow_tf32
            torch.backends.cudnn.allow_tf32 = False  # strict fp32: eager lets cuDNN use TF32
            c = m(x)
            torch.backends.cudnn.allow_tf32 = tf32
            c = c + add_input
            return c * F.hardswish(c)
        x, a = x.contiguous(), add_input.contiguous()
        B, _, D, H, W = x.shape
        Nd, Nh, Nw = (-(-n // S) for n in (OD, OH, OW))  # positions per class, per dimension (at most)
        nblk, nchunk = (Nd * Nh * Nw + 255) // 256, (Co + CMAX - 1) // CMAX
        y = x.new_empty(B, Co, OD, OH, OW)
        _k.convt_add_hswish(B * nblk * nchunk * S ** 3, 256, x.data_ptr(), m.weight.contiguous().data_ptr(),
                            m.bias.data_ptr(), a.data_ptr(), y.data_ptr(), Ci, Co, D, H, W, K, S, P, OD, OH, OW,
                            Nd, Nh, Nw, nblk, nchunk)
        return y
