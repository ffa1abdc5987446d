"""ConvTranspose2d on cuDNN without its bias, then one block per (n, c) for bias, max pool,
Hardtanh, the spatial mean and tanh.

Eager adds the conv's own bias after cuDNN returns (a read and write of the (128, 64, 32, 32)
activation, 33.5 MB), max-pools it (another read, an 8.4 MB write), applies Hardtanh (read and
write), takes the mean over H and W and the tanh: five launches and ~110 MB of traffic after the
conv. Here the conv runs with bias=None and one kernel gives each (n, c) plane a block: each thread
takes 2x2 windows, adds the bias, keeps the max, clamps it to [min, max] and adds it to its sum; a
warp-shuffle block reduction gives the mean, and thread 0 writes tanh(mean). The activation is read
once and only the (128, 64, 1, 1) result is written.

The precision of the head is the whole change from the strict-fp32 version of this task. Eager's
transposed conv runs with cuDNN's default TF32, and on this task that costs nothing in correctness:
eager's own output is 0.38 of the strict tolerance away from the true-fp32 reference, a ~3x margin.
The strict-fp32 version ran its conv with TF32 off and measured 0.56x on the H200 (0.253 -> 0.452
ms): its conv alone made it slower than eager. This one leaves cuDNN's flags as eager's are, so both
run the same conv and the fused epilogue's saving is the difference. Measured on the H200: 1.59x
over eager (0.283 -> 0.178 ms).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1

_k = cudal1.load_cuda(r"""
// x: (N, C, H, W) without the conv bias; y[n * C + c] = tanh(mean(hardtanh(maxpool2x2(x + b)))).
extern "C" __global__ void pool_clamp_mean_tanh(const float* __restrict__ x, const float* __restrict__ cb,
        float* __restrict__ y, long long C, long long H, long long W, float lo, float hi) {
    __shared__ float red[32];
    const long long nc = blockIdx.x;
    const int PW = W / 2, P = (H / 2) * PW;  // 32-bit: a plane is < 2^31
    const float* xp = x + nc * H * W;
    const float b = cb[nc % C];
    float s = 0.f;
    for (int q = threadIdx.x; q < P; q += blockDim.x) {
        const float* w0 = xp + 2 * (q / PW) * W + 2 * (q % PW);
        const float v[4] = {w0[0] + b, w0[1] + b, w0[W] + b, w0[W + 1] + b};
        float m = v[0];
        #pragma unroll
        for (int i = 1; i < 4; ++i) m = (v[i] > m || v[i] != v[i]) ? v[i] : m;  // NaN propagates
        s += m != m ? m : fminf(fmaxf(m, lo), hi);  // hardtanh
    }
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        float t = 0.f;
        for (int w = 0; w < (int)(blockDim.x >> 5); ++w) t += red[w];
        y[nc] = tanhf(t / (float)P);
    }
}""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, maxpool_kernel_size, maxpool_stride, hardtanh_min, hardtanh_max):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding)
        self.maxpool = nn.MaxPool2d(kernel_size=maxpool_kernel_size, stride=maxpool_stride)
        self.hardtanh = nn.Hardtanh(min_val=hardtanh_min, max_val=hardtanh_max)

    def forward(self, x):
        c = self.conv_transpose
        x = F.conv_transpose2d(x, c.weight, None, c.stride, c.padding, c.output_padding, c.groups,
                               c.dilation).contiguous()  # (B, C, 32, 32)
        N, C, H, W = x.shape
        p = self.maxpool
        if p.kernel_size not in (2, (2, 2)) or p.stride not in (2, (2, 2)) or p.padding not in (0, (0, 0)) \
                or p.ceil_mode or H * W >= 2**31:  # configurations this kernel does not cover
            x = self.hardtanh(p(x + c.bias.view(1, -1, 1, 1)))
            return torch.tanh(torch.mean(x, dim=(2, 3), keepdim=True))
        y = x.new_empty(N, C, 1, 1)
        _k.pool_clamp_mean_tanh(N * C, 256, x.data_ptr(), c.bias.data_ptr(), y.data_ptr(), C, H, W,
                                float(self.hardtanh.min_val), float(self.hardtanh.max_val))
        return y
