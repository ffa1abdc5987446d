"""The whole model in one kernel: a direct fp32 transposed convolution summed over each average-pool
window, then clamp, the softmax over channels and the x2 in registers, and one write.

Eager runs the ConvTranspose3d (8 -> 16 channels, 3x3x3, stride 2: output (16, 16, 32, 64, 64),
134 MB), AvgPool3d(2) (reads it, writes 17 MB), clamp, softmax over the channels and the multiply by
2, each a read and a write of the pooled tensor: five launches and ~240 MB of traffic after the conv.
Its conv runs on TF32 tensor cores; cuDNN's true-fp32 one runs on the CUDA cores and alone made a
strict-fp32 version of this task slower than eager. The convolution itself is small, though: with
stride 2 each output takes at most 2 x 2 x 2 input positions of 8 channels, ~27 multiply-adds per
output channel, 0.9 G multiply-adds for the whole output. What costs is the 134 MB the conv writes
and the pool reads back.

So one thread owns one pooled position of one sample and all 16 channels: for each of the 2 x 2 x 2
conv positions of its window it adds that position's transposed-conv taps straight from the input
(weights staged in shared memory as [input channel][tap][output channel] and read as broadcast
float4s) into 16 accumulators; the window's sum over 8 plus the conv bias is the pooled value. The
pool's stride equals its kernel and a multiple of the conv's stride, so every thread of a warp takes
the same taps (no divergence). Then clamp to [0, 1], the softmax over the 16 channels (max first, as
torch does) and the x2, and each channel is written once: 8 MB of input read, 17 MB written, no
temporary. All plain fp32 FMAs, no TF32: only the order of the sums differs from cuDNN's. Other
settings (groups, dilation, more than 16 output channels, other pools) take torch's ops with TF32 off.
Measured on the H200: 3.36x over eager (0.771 -> 0.23 ms); 3.29x on the H100.
"""
import torch
import torch.nn as nn

import cudal1

CMAX, WMAX = 16, 8192  # output channels per thread; weights staged in shared memory (CMAX per tap)

_k = cudal1.load_cuda(r"""
constexpr int CMAX = 16, WMAX = 8192;

// Thread i = ((b * OD + pd) * OH + ph) * OW + pw owns y[b, :, pd, ph, pw]. x: (B, Ci, D, H, W);
// w: (Ci, Co, K, K, K); the conv: stride S, padding P (conv output o takes input i where o = i * S - P + k);
// the pool: a KP^3 window at KP * (pd, ph, pw).
extern "C" __global__ void __launch_bounds__(256) convt_avgpool_softmax(const float* __restrict__ x,
        const float* __restrict__ w, const float* __restrict__ bias, float* __restrict__ y, int Ci, int Co,
        long long D, long long H, long long W, int K, int S, int P, int KP, long long OD, long long OH,
        long long OW, float lo, float hi, float scale, long long n) {
    __shared__ __align__(16) float ws[WMAX];  // ws[(ci * K^3 + tap) * CMAX + c] = w[ci, c, tap], 0 for c >= Co
    const int K3 = K * K * K;
    for (int i = threadIdx.x; i < Ci * K3 * CMAX; i += blockDim.x) {
        const int c = i % CMAX, t = i / CMAX % K3, ci = i / (CMAX * K3);
        ws[i] = c < Co ? w[((long long)ci * Co + c) * K3 + t] : 0.f;
    }
    __syncthreads();
    const long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (j >= n) return;
    const long long pw = j % OW, ph = j / OW % OH, pd = j / (OW * OH) % OD, b = j / (OW * OH * OD);
    float acc[CMAX];
    #pragma unroll
    for (int c = 0; c < CMAX; ++c) acc[c] = 0.f;
    for (int a = 0; a < KP * KP * KP; ++a) {  // the window's conv positions
        const int zd = pd * KP + a / (KP * KP) + P, zh = ph * KP + a / KP % KP + P, zw = pw * KP + a % KP + P;
        // the taps landing here: k = z mod S, z mod S + S, ..., from input i = z / S down (z = i * S + k)
        for (int kd = zd % S, id = zd / S; kd < K && id >= 0; kd += S, --id) {
            if (id >= D) continue;
            for (int kh = zh % S, ih = zh / S; kh < K && ih >= 0; kh += S, --ih) {
                if (ih >= H) continue;
                for (int kw = zw % S, iw = zw / S; kw < K && iw >= 0; kw += S, --iw) {
                    if (iw >= W) continue;
                    const int tap = (kd * K + kh) * K + kw;
                    const float* xp = x + ((b * Ci * D + id) * H + ih) * W + iw;
                    for (int ci = 0; ci < Ci; ++ci) {
                        const float xv = xp[ci * D * H * W];
                        const float4* wt = reinterpret_cast<const float4*>(ws + (ci * K3 + tap) * CMAX);
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
    }
    const float inv = 1.f / (float)(KP * KP * KP);
    float mx = -INFINITY;
    #pragma unroll
    for (int c = 0; c < CMAX; ++c) {
        if (c < Co) {
            float v = acc[c] * inv + bias[c];             // the average of (conv + bias) over the window
            v = v < lo ? lo : (v > hi ? hi : v);          // torch.clamp; NaN stays NaN
            acc[c] = v;
            mx = (v > mx || v != v) ? v : mx;
        }
    }
    float sum = 0.f;
    #pragma unroll
    for (int c = 0; c < CMAX; ++c)
        if (c < Co) { acc[c] = expf(acc[c] - mx); sum += acc[c]; }
    const long long plane = OD * OH * OW, pos = (pd * OH + ph) * OW + pw;
    #pragma unroll
    for (int c = 0; c < CMAX; ++c)
        if (c < Co) y[(b * Co + c) * plane + pos] = acc[c] / sum * scale;  // softmax, then x 2
}
""")


def _same(t):  # the one value of a cubic setting, else None
    return t[0] if len(set(t)) == 1 else None


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, pool_kernel_size,
                 clamp_min, clamp_max):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.avg_pool = nn.AvgPool3d(pool_kernel_size)
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max

    def forward(self, x):
        m, ap = self.conv_transpose, self.avg_pool
        Ci, Co, K = m.weight.shape[:3]
        S, P, Kc, kp = _same(m.stride), _same(m.padding), _same(m.kernel_size), ap.kernel_size
        pool_ok = isinstance(kp, int) and ap.stride == kp and ap.padding == 0 and not ap.ceil_mode \
            and ap.divisor_override is None
        if (not pool_ok or None in (S, P, Kc) or m.groups != 1 or m.dilation != (1, 1, 1) or m.bias is None
                or Co > CMAX or Ci * K ** 3 * CMAX > WMAX or x.dim() != 5):
            tf32 = torch.backends.cudnn.allow_tf32
            torch.backends.cudnn.allow_tf32 = False  # strict fp32: eager lets cuDNN use TF32
            c = m(x)
            torch.backends.cudnn.allow_tf32 = tf32
            return torch.softmax(torch.clamp(ap(c), self.clamp_min, self.clamp_max), dim=1) * 2
        x = x.contiguous()
        B, _, D, H, W = x.shape
        Dc, Hc, Wc = ((n - 1) * S - 2 * P + K + o for n, o in zip((D, H, W), m.output_padding))  # conv output
        y = x.new_empty(B, Co, Dc // kp, Hc // kp, Wc // kp)
        n = B * y[0, 0].numel()
        _k.convt_avgpool_softmax((n + 255) // 256, 256, x.data_ptr(), m.weight.contiguous().data_ptr(),
                                 m.bias.data_ptr(), y.data_ptr(), Ci, Co, D, H, W, K, S, P, kp, *y.shape[2:],
                                 float(self.clamp_min), float(self.clamp_max), 2.0, n)
        return y
