"""The whole model in one kernel: a direct fp32 transposed convolution in 2x2 output squares, a block
owning a tile of squares for all 64 output channels (8 channel groups of 8, a thread one group and a
column of 3 squares), then the channel softmax across the groups through shared memory, + bias, * scale
and the sigmoid in registers, and one write.

Eager runs the ConvTranspose2d (32 -> 64 channels, 4x4, stride 2, padding 1, output padding 1:
(128, 32, 16, 16) -> (128, 64, 33, 33), 8.9 M values, 35.7 MB) on TF32 tensor cores, then the softmax over
channels and the add, multiply and sigmoid, each a pass over 35.7 MB (0.398 ms on the H200). The library
keeps eager's conv and fuses the four passes (1.23x, 0.32 ms); the first draft (a thread computing all 64
channels of one position, strict fp32) lost to it on an H100 (1.35x against 1.43x): per input channel and
tap it reads one input and 16 float4 weights for 64 FMAs, four FMAs a load, so it waits on shared memory.

The convolution is 1.07 G multiply-adds (128 x 32 x 16 x 16 inputs x 64 channels x 16 taps); the squares
below compute 1.21 G (17 x 17 squares of 4 outputs for a 33 x 33 plane): ~36 us at the H200's 67 fp32
TFLOPS. With stride 2 and padding P, o = 2i - P + k, so z = o + P = 2m + e (e = 0, 1): the output
o = 2m + e - P takes tap k = e from input m and k = e + 2 from input m - 1. So the 2x2 output square
m = (mh, mw) needs only the 2x2 inputs m - 1 .. m per dimension (zero outside) and uses each of the 16
taps exactly once for its 4 outputs. Here the squares m = 0 .. 16 hold outputs -1 .. 32; output -1 is
masked on store. The epilogue adds per output two expf and two divisions (~36 instructions, ~0.3 G in
all), and DRAM moves the 4.2 MB input and the 35.7 MB output once (~8 us at 4.8 TB/s).

Mapping: a block is 128 threads, thread t = 16 g + s: channel group g (channels 8 g .. 8 g + 7; a half
warp is one group, so its weight loads are broadcasts) and spatial slot s. Slot q = 16 blockIdx + s owns
square column mw = q % 17 and 3 consecutive square rows R0 = 3 (q / 17) .. R0 + 2, counted across the
samples (row R is square row R % 17 of sample R / 17): 128 x 17 = 2176 rows make 726 columns of 3, so
the tiles waste 2 square rows in 2178 instead of one in 18 (per-sample tiles of 3), and the grid is 772
blocks, within the 2 x 396 that 3 blocks an SM hold on 132 SMs, where per-sample tiles would need 816 (a
thin third wave). A column crosses from sample n to n + 1 only between the input row past the last
(row 16) and the one before the first (row -1), both zero, so its 4 x 2 inputs per input channel are read
as from one plane, each row from its own sample. (With padding of 2 or more the rows at a sample's
edges are not both zero: then each sample's rows are padded to a multiple of 3 and no column crosses.)
The weights of 8 input channels for all 64 channels (8 x 16 x 64 floats, 32 KB of dynamic shared memory)
are staged at a time as [input channel][tap][channel]; per tap a thread reads two broadcast float4s, each
feeding 3 squares x 4 channels = 12 FMAs. Per input channel: 8 input loads (L1: the 8 groups read the
same inputs) and 32 shared loads feed 384 FMAs, 9.6 FMAs a load (the first draft: 4), with 96
accumulators (__launch_bounds__(128, 3); ptxas: 164 registers, no spills; 12 warps an SM). Each block
stages 128 KB of weights in its life, 101 MB from L2 in all. Per thread: 12.3 K FMAs, 1.3 K loads, ~3.5 K
epilogue instructions, so ~53 M warp instructions over 528 schedulers: ~55 us at 1.9 GHz if the issue
rate holds, ~60-80 us with the barriers and tails: an estimate, 4-5x faster than the library's 0.32 ms.

Softmax: each thread adds the conv bias and writes its group's max of each of its 12 positions to shared
memory ([position][group][slot]: conflict-free); after a barrier it takes the max over the 8 groups in
order, exp(v - max) for its 8 channels and their sum, writes that sum; after a second barrier it adds the
8 groups' sums in order 0 .. 7 (deterministic), then exp(v - max) / sum + bias[c], * scale,
1 / (1 + exp(-t)), as torch writes them, and stores. A half warp's two stores per row (columns 2 mw - 1
and 2 mw) fill up to 32 consecutive floats (fewer where its 16 slots wrap to the next row of columns).
No atomics: the output is bitwise reproducible.

Numerics: plain fp32 FMAs, no TF32; each conv sum (32 channels x 1 to 4 taps) runs in another order than
cuDNN's, the softmax sum in groups of 8; expf, IEEE divisions. Other settings (kernel other than 4,
stride other than 2, unequal padding, groups, dilation, non-float32, more than 64 output channels, a
bias not shaped (C, 1, 1), a tensor past 2^31 elements) take torch's ops with cuDNN's TF32 off.
Measured on the H100: 1.96x over eager (0.523 -> 0.266 ms).
"""
import torch
import torch.nn as nn

import cudal1

TH, CK, NG, CG, SP = 3, 8, 8, 8, 16  # squares a thread, input channels staged, groups, channels a group, slots
BT, CMAX = NG * SP, NG * CG  # threads a block, output channels at most

_k = cudal1.load_cuda(r"""
constexpr int TH = 3, CK = 8, NG = 8, CG = 8, SP = 16, BT = NG * SP, CMAX = NG * CG;
// a thread: a column of TH squares x CG channels x 4 outputs = 96 accumulators. __launch_bounds__(BT, 3):
// 3 blocks (12 warps) an SM, at most 168 registers.

// x: (B, Ci, H, W); w: (Ci, Co, 4, 4); y: (B, Co, OH, OW). Conv output o = 2i - P + k; with z = o + P =
// 2m + e (e = 0, 1) the square m holds outputs o = 2m + e - P and takes tap k = e from input m, k = e + 2
// from input m - 1. Square rows are counted across samples: row R is square mh = M0 + R % NSH of sample
// R / NSH (M0 = P / 2, the first square with an output >= 0; NSH >= the squares a column of a sample has,
// the extra ones masked). Thread t: group g = t / SP (output channels g * CG + c), slot s = t % SP; slot
// q = blockIdx.x * SP + s (q < NQ) owns square column mw = M0 + q % NW and rows R0 = TH * (q / NW) + a.
extern "C" __global__ void __launch_bounds__(BT, 3) convt_softmax_bias_scale_sigmoid(const float* __restrict__ x,
        const float* __restrict__ w, const float* __restrict__ cb, const float* __restrict__ bias,
        float* __restrict__ y, int B, int Ci, int Co, int H, int W, int P, int OH, int OW, int NW, int NSH, int NQ,
        float scale) {
    extern __shared__ __align__(16) float ws[];  // ws[(ci % CK * 16 + tap) * CMAX + co]; then the softmax's sums
    const int t = threadIdx.x, g = t / SP, s = t % SP, q = blockIdx.x * SP + s;
    const int M0 = P / 2, HW = H * W, mw = M0 + q % NW, R0 = TH * (q / NW);
    const bool live = q < NQ;  // no early return: the block meets at barriers
    // the column's inputs: row dz < TH is the row above square R0 + dz (mh - 1), row TH the one below the
    // last (mh); columns mw - 1 + wz. At a sample's edge the row below its last square and the row above the
    // next's first are both past the input (the caller pads NSH otherwise), so rows dz and dz + 1 may come
    // from two samples. off[dz]: the row's offset in x at input channel 0; ok: which inputs exist.
    int off[TH + 1];
    unsigned ok = 0;
    #pragma unroll
    for (int dz = 0; dz <= TH; ++dz) {
        const int R = R0 + min(dz, TH - 1), n = R / NSH, ih = M0 - 1 + R % NSH + (dz == TH);
        const bool row = live && n < B && ih >= 0 && ih < H;
        off[dz] = row ? (n * Ci * H + ih) * W + mw - 1 : 0;  // may be -1: only read where ok says it exists
        #pragma unroll
        for (int wz = 0; wz < 2; ++wz)
            if (row && mw - 1 + wz >= 0 && mw - 1 + wz < W) ok |= 1u << (dz * 2 + wz);
    }
    float acc[CG][TH][4];  // [channel][square a][eh * 2 + ew]
    #pragma unroll
    for (int c = 0; c < CG; ++c)
        #pragma unroll
        for (int a = 0; a < TH; ++a)
            #pragma unroll
            for (int e = 0; e < 4; ++e) acc[c][a][e] = 0.f;
    const float4* w4 = reinterpret_cast<const float4*>(w);  // w4[(ci * Co + co) * 4 + j]: taps 4j .. 4j + 3
    for (int ci0 = 0; ci0 < Ci; ci0 += CK) {
        __syncthreads();  // the last chunk's weights are read
        for (int i = t; i < CK * 16 * CMAX / 4; i += BT) {  // co fastest: the shared stores hit 32 banks
            const int co = i % CMAX, j = i / CMAX % 4, cl = i / (CMAX * 4);
            const float4 v = ci0 + cl < Ci && co < Co ? w4[((long long)(ci0 + cl) * Co + co) * 4 + j]
                                                      : make_float4(0.f, 0.f, 0.f, 0.f);
            float* d = ws + (cl * 16 + 4 * j) * CMAX + co;
            d[0] = v.x; d[CMAX] = v.y; d[2 * CMAX] = v.z; d[3 * CMAX] = v.w;
        }
        __syncthreads();
        const int nc = min(CK, Ci - ci0);
        const float* xp = x + ci0 * HW;
        const float4* wt = reinterpret_cast<const float4*>(ws) + g * (CG / 4);  // the group's channels of a tap
        for (int cl = 0; cl < nc; ++cl, xp += HW, wt += 16 * CMAX / 4) {
            float xv[TH + 1][2];
            #pragma unroll
            for (int dz = 0; dz <= TH; ++dz)
                #pragma unroll
                for (int wz = 0; wz < 2; ++wz) xv[dz][wz] = ok >> (dz * 2 + wz) & 1u ? xp[off[dz] + wz] : 0.f;
            #pragma unroll
            for (int kh = 0; kh < 4; ++kh)
                #pragma unroll
                for (int kw = 0; kw < 4; ++kw) {
                    const int e = (kh & 1) * 2 + (kw & 1);  // tap k: output offset k % 2, input row m - k / 2
                    #pragma unroll
                    for (int c4 = 0; c4 < CG / 4; ++c4) {
                        const float4 wq = wt[(kh * 4 + kw) * (CMAX / 4) + c4];  // broadcast in the half warp
                        #pragma unroll
                        for (int a = 0; a < TH; ++a) {
                            const float v = xv[a + 1 - kh / 2][1 - kw / 2];
                            acc[4 * c4][a][e] = fmaf(v, wq.x, acc[4 * c4][a][e]);
                            acc[4 * c4 + 1][a][e] = fmaf(v, wq.y, acc[4 * c4 + 1][a][e]);
                            acc[4 * c4 + 2][a][e] = fmaf(v, wq.z, acc[4 * c4 + 2][a][e]);
                            acc[4 * c4 + 3][a][e] = fmaf(v, wq.w, acc[4 * c4 + 3][a][e]);
                        }
                    }
                }
        }
    }
    // softmax over the 64 channels of each of the thread's 12 positions p = a * 4 + e, across the groups:
    // red[(p * NG + g) * SP + s] the group's max, then (sums) the group's sum of exp(v - max)
    __syncthreads();  // the weights are read: ws now holds the reductions
    float* red = ws;
    float* sums = ws + TH * 4 * NG * SP;
    #pragma unroll
    for (int c = 0; c < CG; ++c) {
        const int co = g * CG + c;
        const float b = co < Co ? cb[co] : 0.f;
        #pragma unroll
        for (int a = 0; a < TH; ++a)
            #pragma unroll
            for (int e = 0; e < 4; ++e) acc[c][a][e] = co < Co ? acc[c][a][e] + b : -INFINITY;  // exp -> 0
    }
    #pragma unroll
    for (int a = 0; a < TH; ++a)
        #pragma unroll
        for (int e = 0; e < 4; ++e) {
            float m = acc[0][a][e];
            #pragma unroll
            for (int c = 1; c < CG; ++c) m = fmaxf(m, acc[c][a][e]);
            red[((a * 4 + e) * NG + g) * SP + s] = m;
        }
    __syncthreads();
    #pragma unroll
    for (int a = 0; a < TH; ++a)
        #pragma unroll
        for (int e = 0; e < 4; ++e) {
            const float* r = red + (a * 4 + e) * NG * SP + s;
            float m = r[0];
            #pragma unroll
            for (int k = 1; k < NG; ++k) m = fmaxf(m, r[k * SP]);
            float sum = 0.f;
            #pragma unroll
            for (int c = 0; c < CG; ++c) {
                acc[c][a][e] = expf(acc[c][a][e] - m);
                sum += acc[c][a][e];
            }
            sums[((a * 4 + e) * NG + g) * SP + s] = sum;
        }
    __syncthreads();
    if (!live) return;  // no barrier follows
    const int ow = 2 * mw - P;  // the square column's outputs ow, ow + 1
    #pragma unroll
    for (int a = 0; a < TH; ++a) {
        const int R = R0 + a, n = R / NSH, oh0 = 2 * (M0 + R % NSH) - P;  // the square's outputs oh0, oh0 + 1
        if (n >= B) break;
        float tot[4];
        #pragma unroll
        for (int e = 0; e < 4; ++e) {  // the groups' sums in order 0 .. NG - 1
            const float* r = sums + (a * 4 + e) * NG * SP + s;
            tot[e] = r[0];
            #pragma unroll
            for (int k = 1; k < NG; ++k) tot[e] += r[k * SP];
        }
        #pragma unroll
        for (int c = 0; c < CG; ++c) {
            const int co = g * CG + c;
            if (co >= Co) break;
            const float bc = bias[co];
            float* yp = y + (n * Co + co) * OH * OW;
            #pragma unroll
            for (int eh = 0; eh < 2; ++eh) {
                const int oh = oh0 + eh;
                if (oh < 0 || oh >= OH) continue;
                #pragma unroll
                for (int ew = 0; ew < 2; ++ew) {
                    if (ow + ew < 0 || ow + ew >= OW) continue;
                    const float v = (acc[c][a][eh * 2 + ew] / tot[eh * 2 + ew] + bc) * scale;  // softmax, bias, scale
                    yp[oh * OW + ow + ew] = 1.f / (1.f + expf(-v));  // torch.sigmoid
                }
            }
        }
    }
}
""")


def _same(t):  # the one value of a square setting, else None
    t = tuple(t) if isinstance(t, (tuple, list)) else (t,)
    return t[0] if len(set(t)) == 1 else None


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, bias_shape,
                 scaling_factor):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.scaling_factor = scaling_factor

    def forward(self, x):
        m = self.conv_transpose
        Ci, Co = m.weight.shape[:2]
        P = _same(m.padding)
        ok = (_same(m.kernel_size) == 4 and _same(m.stride) == 2 and P is not None and m.groups == 1
              and _same(m.dilation) == 1 and m.bias is not None and m.padding_mode == "zeros" and x.dim() == 4
              and x.dtype == torch.float32 and m.weight.dtype == torch.float32 and m.bias.dtype == torch.float32
              and self.bias.dtype == torch.float32 and Co <= CMAX and tuple(self.bias.shape) == (Co, 1, 1))
        if ok:  # the conv output (B, Co, OH, OW); the kernel indexes x and y in int
            B, _, H, W = x.shape
            OH, OW = ((n - 1) * 2 - 2 * P + 4 + o for n, o in zip((H, W), m.output_padding))
            ok = B > 0 and Ci > 0 and OH > 0 and OW > 0 and x.numel() < 2 ** 31 and B * Co * OH * OW < 2 ** 31
        if not ok:
            tf32 = torch.backends.cudnn.allow_tf32
            torch.backends.cudnn.allow_tf32 = False  # strict fp32: eager lets cuDNN use TF32
            c = m(x)
            torch.backends.cudnn.allow_tf32 = tf32
            return torch.sigmoid((torch.softmax(c, dim=1) + self.bias) * self.scaling_factor)
        x = x.contiguous()
        w = m.weight.contiguous()
        if w.data_ptr() % 16:  # the kernel reads the weights as float4s
            w = w.clone()
        M0 = P // 2
        NW = (OW - 1 + P) // 2 - M0 + 1  # squares per dimension: m = M0 .. (O - 1 + P) // 2
        NSH = (OH - 1 + P) // 2 - M0 + 1
        if not (M0 == 0 and M0 + NSH - 1 >= H):  # a sample's edge rows are not both zero: pad to whole columns
            NSH = -(-NSH // TH) * TH
        NQ = NW * -(-B * NSH // TH)  # slots: square columns x columns of TH rows
        y = x.new_empty(B, Co, OH, OW)
        _k.convt_softmax_bias_scale_sigmoid(-(-NQ // SP), BT, x.data_ptr(), w.data_ptr(), m.bias.data_ptr(),
                                            self.bias.contiguous().data_ptr(), y.data_ptr(), B, Ci, Co, H, W, P, OH,
                                            OW, NW, NSH, NQ, float(self.scaling_factor), shared=CK * 16 * CMAX * 4)
        return y
