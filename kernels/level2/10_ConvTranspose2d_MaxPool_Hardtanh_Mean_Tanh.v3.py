"""The whole model in one kernel: a direct fp32 transposed convolution computed pool window by pool
window -- each 2x2 window is one parity square, 16 FMAs per (input, output) channel pair -- a thread
owning a column of 4 windows and 8 output channels, a block owning a sample's whole pooled plane, so
the max, Hardtanh, the mean and tanh end in registers and shared memory: only (B, C, 1, 1) is written.

Eager runs the ConvTranspose2d (32 -> 64 channels, 4x4, stride 2, padding 1: (128, 32, 16, 16) ->
(128, 64, 32, 32), 33.5 MB) on TF32 tensor cores, which passes the strict check only by ~2.4x (its error 0.4 of the tolerance) and which
cuDNN's true-fp32 kernel runs slower than eager's whole forward, then MaxPool2d(2) (reads it, writes
8.4 MB), Hardtanh, the mean and tanh. The library's strict answer (1.7x) is a direct conv a thread per
pooled position and 16 channels: per input channel and tap it reads one input value and four float4
weights for 16 FMAs, 3.2 FMAs a load, so it is load-bound.

The convolution is 1.07 G multiply-adds over the 32 x 32 outputs (128 x 64 x 1024 outputs x 32 input
channels x 2 x 2 taps; 1.01 G of them land on real inputs, the rest on the padding): 32 us at the H200's
67 fp32 TFLOPS. With stride 2 and padding 1, z = o + 1 = 2i + k. The pool window q holds outputs 2q and
2q + 1 per dimension: z = 2q + 1 takes taps k = 1 from input q and k = 3 from q - 1, z = 2q + 2 takes
k = 0 from q + 1 and k = 2 from q. So a window needs the 3x3 inputs q - 1 .. q + 1 (zero outside x) and
uses each of the 16 taps exactly once for its 4 outputs. (With even padding P the window is the 2D
drafts' square, 2x2 inputs; the code takes any P = 2U + R: inputs q + U - 1 .. q + U + R, tap k on
output (k + R) % 2 of the window, a template on R.)

Mapping: block (n, chunk) owns sample n's 16 x 16 pooled plane and 8 output channels (grid 128 x 8 =
1024 blocks of 64 threads); thread t owns window column qw = t % 16 and windows qh = 4 (t / 16) .. + 3
(16 rows = 4 x 4: no window wasted; a plane with more than 64 such tiles is looped over). A warp covers
two rows of 16 consecutive columns, so its input loads are adjacent addresses. The 4 windows need 6 x 3
= 18 inputs per input channel (L1). The block stages its channels' weights in shared memory as [input
channel][tap][channel] (32 x 16 x 8 floats, 16 KB); per tap a thread reads two broadcast float4s, each
feeding 4 windows x 4 channels = 16 FMAs. Per input channel: 18 input loads and 32 shared loads feed 512
FMAs, 10.2 FMAs a load where the library's kernel has 3.2, with 8 x 4 x 4 = 128 accumulators (nvcc:
255 registers, no spills, __launch_bounds__(64, 4): 8 warps an SM). Counting a broadcast LDS.128 as two
of the SM's 128-byte load cycles, a warp keeps the load pipe busy ~82 cycles (64 + the 18 input loads)
per input channel against the 128 its FMAs take at 128 lanes a cycle. The alternatives, judged by
ptxas alone: a column of 3 windows (15 inputs at padding 1, 96 threads a plane) held to 168 registers
for 9 or 12 warps an SM spills; 4 channels a block (155 registers, 12 warps) halves the FMAs per input
load and makes 2048 blocks, 2.6 waves of 792, where these 1024 make 1.94 waves of 528.

After the 32 input channels, each (channel, window) is 4 values in registers: + conv bias per value,
the max in the window's (h, w) order as torch's pool takes it (NaN wins, ties keep the first),
Hardtanh (NaN kept), added to the thread's per-channel sum. Then a shuffle tree per warp, the two warps'
sums in order in shared memory, and tanh(sum / 256) per channel: a fixed order, no atomics, the output
bitwise reproducible. DRAM traffic: the 4.2 MB input (read by the 8 channel chunks, mostly from L2)
and 32 KB written, ~1 us at 4.8 TB/s: the kernel is the conv's FMAs and nothing else.

Numerics: plain fp32 FMAs, no TF32; each output's sum (32 channels x 4 taps) runs over (input channel,
tap) in another order than cuDNN's, and the 256 pooled values are summed in a tree where torch sums them
its own way: rounding-level differences. Other settings (kernel other than 4, stride other than 2,
unequal padding, groups, dilation, non-float32, a pool other than kernel 2 = stride 2 without padding,
dilation or ceil mode, more input channels than 48 KB of staged weights hold, a sample past 2^31
elements) take torch's ops with cuDNN's TF32 off; output padding 1 is covered (the floor of the pool
drops its extra row).
Measured on the H100: 2.14x over eager (0.357 -> 0.167 ms).
"""
import torch
import torch.nn as nn

import cudal1

TH, CT, BT, SMEM = 4, 8, 64, 48 * 1024  # windows a thread (a column), channels a block, threads a block, shared bytes

_k = cudal1.load_cuda(r"""
constexpr int TH = 4, CT = 8, BT = 64;
// a thread: a column of TH pool windows x CT channels x 4 conv outputs = 128 accumulators.
// __launch_bounds__(BT, 4): 4 blocks = 8 warps an SM (ptxas takes 255 registers, no spills; for 5 blocks it
// holds them to 168, 3 warps a scheduler, and spills).

__device__ __forceinline__ float nanmax(float a, float b) { return (a > b || a != a) ? a : b; }  // torch's pool

// The sums over this thread's pool windows of hardtanh(max of the window's 4 conv outputs + bias), per channel,
// added into s. Window (qh, qw) holds conv outputs (2 qh + dh, 2 qw + dw), d = 0, 1; with P = 2U + R and
// o + P = 2i + k per dimension, tap k lands on d = (k + R) % 2 from input i = q + U - 1 + (1 - k / 2 + R (1 - k % 2)),
// so the window reads inputs q + U - 1 .. q + U + R and uses each of the 16 taps once for its 4 outputs.
// Thread t takes tiles t, t + BT, ... of the NW x NR tiles (a column of TH windows) of sample n's pooled plane.
template <int R>
__device__ __forceinline__ void window_sums(float (&s)[CT], const float* __restrict__ xn, const float* __restrict__ ws,
        const float* __restrict__ cb, int c0, int Ci, int Co, int H, int W, int U, int PH, int NW, int NT,
        float lo, float hi) {
    constexpr int XH = TH + 1 + R, XW = 2 + R;  // the column's inputs: XH rows x XW columns
    const int HW = H * W;
    for (int tl = threadIdx.x; tl < NT; tl += BT) {
        const int qw = tl % NW, qh0 = TH * (tl / NW), ih0 = qh0 + U - 1, iw0 = qw + U - 1;
        unsigned ok = 0;  // bit per input: inside x
        #pragma unroll
        for (int dz = 0; dz < XH; ++dz)
            #pragma unroll
            for (int wz = 0; wz < XW; ++wz)
                if (ih0 + dz >= 0 && ih0 + dz < H && iw0 + wz >= 0 && iw0 + wz < W) ok |= 1u << (dz * XW + wz);
        float acc[CT][TH][4];  // [channel][window a][dh * 2 + dw]
        #pragma unroll
        for (int c = 0; c < CT; ++c)
            #pragma unroll
            for (int a = 0; a < TH; ++a)
                #pragma unroll
                for (int e = 0; e < 4; ++e) acc[c][a][e] = 0.f;
        const float* xp = xn;
        const int base = ih0 * W + iw0;  // may be negative: only read where ok says the input exists
        const float4* wt = reinterpret_cast<const float4*>(ws);
        for (int ci = 0; ci < Ci; ++ci, xp += HW, wt += 16 * CT / 4) {
            float xv[XH][XW];
            #pragma unroll
            for (int dz = 0; dz < XH; ++dz)
                #pragma unroll
                for (int wz = 0; wz < XW; ++wz) xv[dz][wz] = ok >> (dz * XW + wz) & 1u ? xp[base + dz * W + wz] : 0.f;
            #pragma unroll
            for (int kh = 0; kh < 4; ++kh)
                #pragma unroll
                for (int kw = 0; kw < 4; ++kw) {
                    const int e = (kh + R) % 2 * 2 + (kw + R) % 2;  // the window's output this tap lands on
                    const int dh = 1 - kh / 2 + R * (1 - kh % 2), dw = 1 - kw / 2 + R * (1 - kw % 2);  // its input
                    #pragma unroll
                    for (int c4 = 0; c4 < CT / 4; ++c4) {
                        const float4 wq = wt[(kh * 4 + kw) * (CT / 4) + c4];  // broadcast
                        #pragma unroll
                        for (int a = 0; a < TH; ++a) {
                            const float v = xv[a + dh][dw];
                            acc[4 * c4][a][e] = fmaf(v, wq.x, acc[4 * c4][a][e]);
                            acc[4 * c4 + 1][a][e] = fmaf(v, wq.y, acc[4 * c4 + 1][a][e]);
                            acc[4 * c4 + 2][a][e] = fmaf(v, wq.z, acc[4 * c4 + 2][a][e]);
                            acc[4 * c4 + 3][a][e] = fmaf(v, wq.w, acc[4 * c4 + 3][a][e]);
                        }
                    }
                }
        }
        // each (c, a) is one pool window: + bias, the max in the window's (h, w) order, hardtanh, into the sum
        #pragma unroll
        for (int c = 0; c < CT; ++c) {
            const float bias = c0 + c < Co ? cb[c0 + c] : 0.f;
            #pragma unroll
            for (int a = 0; a < TH; ++a) {
                if (qh0 + a >= PH) break;
                float m = -INFINITY;
                #pragma unroll
                for (int e = 0; e < 4; ++e) m = nanmax(acc[c][a][e] + bias, m);
                s[c] += m != m ? m : fminf(fmaxf(m, lo), hi);  // hardtanh: NaN stays NaN
            }
        }
    }
}

// x: (B, Ci, H, W); w: (Ci, Co, 4, 4); the conv (stride 2, padding P = 2U + R) max-pooled 2x2 to (PH, PW = NW);
// y: (B, Co), y[n, co] = tanh(mean over the pooled plane of hardtanh). Block (n, chunk): sample n, channels
// c0 + c (c < CT), c0 = blockIdx.y * CT; it owns the whole pooled plane, so the mean is a block sum.
extern "C" __global__ void __launch_bounds__(BT, 4) convt_pool_hardtanh_mean_tanh(const float* __restrict__ x,
        const float* __restrict__ w, const float* __restrict__ cb, float* __restrict__ y, int Ci, int Co, int H,
        int W, int P, int PH, int NW, int NR, float lo, float hi) {
    extern __shared__ __align__(16) float ws[];  // ws[(ci * 16 + tap) * CT + c] = w[ci, c0 + c, tap], 0 past Co
    float* red = ws + Ci * 16 * CT;              // red[warp * CT + c]: per-warp channel sums
    const int c0 = blockIdx.y * CT, t = threadIdx.x;
    for (int i = t; i < Ci * 16 * CT; i += BT) {  // tap fastest: the chunk's weights of one ci are contiguous
        const int tap = i % 16, c = i / 16 % CT, ci = i / (16 * CT);
        ws[(ci * 16 + tap) * CT + c] = c0 + c < Co ? w[((long long)ci * Co + c0 + c) * 16 + tap] : 0.f;
    }
    __syncthreads();
    const float* xn = x + (long long)blockIdx.x * Ci * H * W;
    float s[CT];  // this thread's sums, in its tiles' order
    #pragma unroll
    for (int c = 0; c < CT; ++c) s[c] = 0.f;
    if (P % 2) window_sums<1>(s, xn, ws, cb, c0, Ci, Co, H, W, P / 2, PH, NW, NW * NR, lo, hi);
    else window_sums<0>(s, xn, ws, cb, c0, Ci, Co, H, W, P / 2, PH, NW, NW * NR, lo, hi);
    // fixed order: a shuffle tree per warp, then the warps in order
    #pragma unroll
    for (int c = 0; c < CT; ++c) {
        #pragma unroll
        for (int o = 16; o > 0; o >>= 1) s[c] += __shfl_xor_sync(0xffffffffu, s[c], o);
        if (t % 32 == 0) red[t / 32 * CT + c] = s[c];
    }
    __syncthreads();
    if (t < CT && c0 + t < Co) {
        float sum = 0.f;
        #pragma unroll
        for (int k = 0; k < BT / 32; ++k) sum += red[k * CT + t];
        y[(long long)blockIdx.x * Co + c0 + t] = tanhf(sum / (float)(PH * NW));
    }
}
""")


def _same(t):  # the one value of a square setting, else None
    t = tuple(t) if isinstance(t, (tuple, list)) else (t,)
    return t[0] if len(set(t)) == 1 else None


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, maxpool_kernel_size, maxpool_stride,
                 hardtanh_min, hardtanh_max):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding)
        self.maxpool = nn.MaxPool2d(kernel_size=maxpool_kernel_size, stride=maxpool_stride)
        self.hardtanh = nn.Hardtanh(min_val=hardtanh_min, max_val=hardtanh_max)

    def forward(self, x):
        m, mp = self.conv_transpose, self.maxpool
        Ci, Co = m.weight.shape[:2]
        P = _same(m.padding)
        ok = (_same(m.kernel_size) == 4 and _same(m.stride) == 2 and P is not None and m.groups == 1
              and _same(m.dilation) == 1 and m.bias is not None and m.padding_mode == "zeros" and x.dim() == 4
              and x.dtype == torch.float32 and m.weight.dtype == torch.float32 and m.bias.dtype == torch.float32
              and _same(mp.kernel_size) == 2 and _same(mp.stride) == 2 and _same(mp.padding) == 0
              and _same(mp.dilation) == 1 and not mp.ceil_mode and not mp.return_indices
              and (Ci * 16 + BT // 32) * CT * 4 <= SMEM)
        if ok:  # the conv output (OH, OW), pooled (PH, PW) in floor mode; a sample's input indexed in int
            B, _, H, W = x.shape
            OH, OW = ((n - 1) * 2 - 2 * P + 4 + o for n, o in zip((H, W), m.output_padding))
            PH, PW = OH // 2, OW // 2
            ok = B > 0 and PH > 0 and PW > 0 and Ci * H * W < 2 ** 31 and B < 2 ** 31
        if not ok:
            tf32 = torch.backends.cudnn.allow_tf32
            torch.backends.cudnn.allow_tf32 = False  # strict fp32: eager lets cuDNN use TF32
            c = m(x)
            torch.backends.cudnn.allow_tf32 = tf32
            return torch.tanh(torch.mean(self.hardtanh(mp(c)), dim=(2, 3), keepdim=True))
        x = x.contiguous()
        y = x.new_empty(B, Co, 1, 1)
        _k.convt_pool_hardtanh_mean_tanh((B, -(-Co // CT)), BT, x.data_ptr(), m.weight.contiguous().data_ptr(),
                                         m.bias.data_ptr(), y.data_ptr(), Ci, Co, H, W, P, PH, PW, -(-PH // TH),
                                         float(self.hardtanh.min_val), float(self.hardtanh.max_val),
                                         shared=(Ci * 16 + BT // 32) * CT * 4)
        return y
