"""ConvTranspose3d without its bias as a TF32 and a bf16 cuDNN call (TF32 + bf16), then BatchNorm and
the spatial-mean subtraction folded into one statistics pass and one apply pass.

The head is the cost here. Eager's transposed conv runs on TF32 tensor cores, whose output is 22.2x
outside the strict tolerance, so a solution must match true fp32 -- and cuDNN's true-fp32 transposed
conv runs on the CUDA cores, which made the strict version 0.69x on H200 (2.08 -> 3.01 ms) although
the passes below save ~1 GB of traffic (~0.2 ms at H200 bandwidth). TF32 + bf16 gets fp32 accuracy
from the tensor cores at about two TF32 convolutions' work: split x = xh + xl and w = wh + wl, where
xh and wh keep TF32's 10 mantissa bits exactly and the low parts are at most 2^-10 of them; then x*w
= xh*wh + xh*wl + xl*wh + xl*wl, and only the last term (~2^-20 relative) is dropped. xh*wh runs on
TF32 tensor cores, where a product of two TF32 numbers is exact and the sums are fp32; the two cross
terms, ~2^-11 of the result, run as one bf16 convolution over twice the input channels (cat([xh,
xl]) against cat([wl, wh]), cudal1.conv_tf32_bf16), at bf16's twice-TF32 rate, where bf16's 8-bit
mantissa costs ~2^-19 of the result. 3xTF32, the same three products as one TF32 convolution over
three times the channels, is three TF32 convolutions' work.

The epilogue is unchanged. In training mode BatchNorm gives y = (x - mu_c) * rstd_c * w_c + b_c, and
subtracting y's spatial mean per (n, c) leaves out = (x - m_nc) * rstd_c * w_c: mu_c, b_c and the
conv bias all cancel. Eager adds the conv bias, runs BatchNorm, the mean and the subtraction: ~7
passes over the (16, 32, 31, 63, 63) activation (252 MB), ~1.8 GB. Here (1) one block per (n, c)
sums x and x^2 in double; (2) a tiny kernel turns them into w_c * rstd_c and m_nc, and updates
running_mean (with the conv bias added back) and running_var (unbiased) with the momentum, as
BatchNorm does (num_batches_tracked is incremented in torch); (3) one pass writes (x - m_nc) *
scale_c. That is two reads and one write (~760 MB). With 3xTF32 this file measured 1.47x over eager
on the H200 (2.05 -> 1.39 ms); this version is not yet measured.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1

_k = cudal1.load_cuda(r"""
// One block per (n, c) plane of S elements: ws[nc] = (sum x, sum x^2), in double.
extern "C" __global__ void plane_sums(const float* __restrict__ x, double2* __restrict__ ws, long long S) {
    __shared__ double sh[2][32];
    const float* xp = x + blockIdx.x * S;
    double s1 = 0.0, s2 = 0.0;
    for (long long i = threadIdx.x; i < S; i += blockDim.x) { const double v = xp[i]; s1 += v; s2 += v * v; }
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        s1 += __shfl_xor_sync(0xffffffffu, s1, o);
        s2 += __shfl_xor_sync(0xffffffffu, s2, o);
    }
    if ((threadIdx.x & 31) == 0) { sh[0][threadIdx.x >> 5] = s1; sh[1][threadIdx.x >> 5] = s2; }
    __syncthreads();
    if (threadIdx.x == 0) {
        s1 = s2 = 0.0;
        for (int w = 0; w < (int)(blockDim.x >> 5); ++w) { s1 += sh[0][w]; s2 += sh[1][w]; }
        ws[blockIdx.x] = make_double2(s1, s2);
    }
}

// One thread per channel c: scale[c] = w_c * rstd_c, mnc[n * C + c] = plane mean; running stats.
extern "C" __global__ void channel_stats(const double2* __restrict__ ws, const float* __restrict__ weight,
        const float* __restrict__ cb, float* __restrict__ scale, float* __restrict__ mnc,
        float* __restrict__ running_mean, float* __restrict__ running_var,
        long long N, long long C, long long S, float eps, float momentum) {
    const long long c = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (c >= C) return;
    double s1 = 0.0, s2 = 0.0;
    for (long long n = 0; n < N; ++n) {
        const double2 v = ws[n * C + c];
        s1 += v.x; s2 += v.y;
        mnc[n * C + c] = (float)(v.x / S);
    }
    const double count = (double)N * S, mean = s1 / count;
    const double var = fmax(s2 / count - mean * mean, 0.0);  // biased: what BatchNorm divides by
    scale[c] = (float)(weight[c] / sqrt(var + eps));
    const double bias = cb ? cb[c] : 0.0;  // the conv bias shifts the batch mean only
    running_mean[c] = (float)((1.0 - momentum) * running_mean[c] + momentum * (mean + bias));
    running_var[c] = (float)((1.0 - momentum) * running_var[c] + momentum * var * count / (count - 1.0));
}

// grid (ceil(S / blockDim), C, N): y = (x - mnc[n, c]) * scale[c].
extern "C" __global__ void apply(const float* __restrict__ x, const float* __restrict__ scale,
        const float* __restrict__ mnc, float* __restrict__ y, long long C, long long S) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= S) return;
    const long long plane = blockIdx.z * C + blockIdx.y;
    y[plane * S + i] = (x[plane * S + i] - mnc[plane]) * scale[blockIdx.y];
}""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, bias=True):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, bias=bias)
        self.batch_norm = nn.BatchNorm3d(out_channels)

    def forward(self, x):
        c, bn = self.conv_transpose, self.batch_norm
        x = cudal1.conv_tf32_bf16(F.conv_transpose3d, x, c.weight, None, stride=c.stride, padding=c.padding,
                               output_padding=c.output_padding,
                               dilation=c.dilation).contiguous()  # (B, C, D', H', W'), no bias
        N, C = x.shape[:2]
        S = x[0, 0].numel()
        if not (bn.training and bn.track_running_stats and bn.momentum is not None and bn.affine) \
                or N * S < 2 or N > 65535:  # what this path does not cover: torch's way
            if c.bias is not None:
                x = x + c.bias.view(1, -1, 1, 1, 1)
            x = bn(x)
            return x - torch.mean(x, dim=(2, 3, 4), keepdim=True)
        ws = torch.empty(N * C, 2, dtype=torch.float64, device=x.device)  # per-plane sums
        st = torch.empty(C + N * C, dtype=torch.float32, device=x.device)  # scale[C], then mnc[N, C]
        y = torch.empty_like(x)
        _k.plane_sums(N * C, 512, x.data_ptr(), ws.data_ptr(), S)
        _k.channel_stats((C + 31) // 32, 32, ws.data_ptr(), bn.weight.data_ptr(),
                         0 if c.bias is None else c.bias.data_ptr(), st.data_ptr(), st.data_ptr() + 4 * C,
                         bn.running_mean.data_ptr(), bn.running_var.data_ptr(), N, C, S, float(bn.eps),
                         float(bn.momentum))
        bn.num_batches_tracked.add_(1)
        _k.apply(((S + 255) // 256, C, N), 256, x.data_ptr(), st.data_ptr(), st.data_ptr() + 4 * C,
                 y.data_ptr(), C, S)
        return y
