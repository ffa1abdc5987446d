"""ConvTranspose3d on cuDNN without its bias, then one warp-per-row kernel for bias, add,
LayerNorm over the width, 2x2x2 average pool and GELU.

The conv's output is (128, 64, 32, 64, 64), 1.07 G floats (4.3 GB). Eager adds the conv bias
(after cuDNN returns), adds sum_weight, runs LayerNorm (over the last dim, the width W = 64), the
average pool and GELU: ~27 GB of traffic. Here one kernel reads the activation once and writes only the pooled
eighth. A warp owns an output row (n, c, od, oh): its 4 input rows (d = 2od + {0,1}, h = 2oh +
{0,1}) have 64 floats each, and lane l loads the float2 at w = 2l, 2l+1 -- exactly the pool pair
of output column l. Per row the warp adds the biases, gets mean and biased variance from two
shuffle reductions (two-pass, in registers), normalizes with eps and the affine weight/bias and
adds into the lane's pool sum; then GELU (erf form) of sum / 8 is stored, 32 coalesced floats.
The conv runs with TF32 off (true fp32), while eager's timed run lets cuDNN use TF32, so the
232 GFLOP head costs several ms more than eager's, about what the saved traffic is worth. Measured:
0.999x on H200 (38.28 -> 38.31 ms), a tie, as that balance predicts; eager's own output is 16x
outside the strict tolerance, the mark of its TF32 conv.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1

_k = cudal1.load_cuda(r"""
__device__ __forceinline__ float warp_sum(float v) {
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// x: (N, C, D2, H2, 64) without the conv bias; y: (N, C, D2/2, H2/2, 32). One warp per y row
// (n, c, od, oh): grid (ceil(OH / warps per block), OD, N * C), so no index needs a division.
extern "C" __global__ void ln_pool_gelu(const float* __restrict__ x, const float* __restrict__ cb,
        const float* __restrict__ gamma, const float* __restrict__ beta, float* __restrict__ y,
        const float* __restrict__ sum_weight, long long C, long long D2, long long H2, float eps) {
    const long long OD = D2 / 2, OH = H2 / 2;
    const long long oh = blockIdx.x * (long long)(blockDim.x >> 5) + (threadIdx.x >> 5);
    const long long od = blockIdx.y, nc = blockIdx.z, r = (nc * OD + od) * OH + oh;  // output row
    const int lane = threadIdx.x & 31;
    if (oh >= OH) return;  // the same for the whole warp
    const float b = cb[blockIdx.z % (unsigned)C], sw = *sum_weight;  // sum_weight stays on the device: no sync
    const float2 g = reinterpret_cast<const float2*>(gamma)[lane];
    const float2 be = reinterpret_cast<const float2*>(beta)[lane];
    float acc = 0.f;
    #pragma unroll
    for (int a = 0; a < 2; ++a)
        #pragma unroll
        for (int e = 0; e < 2; ++e) {
            const float2* row = reinterpret_cast<const float2*>(x + ((nc * D2 + 2 * od + a) * H2 + 2 * oh + e) * 64);
            float2 v = row[lane];
            v.x = (v.x + b) + sw; v.y = (v.y + b) + sw;         // conv bias, then + sum_weight
            const float mean = warp_sum(v.x + v.y) * (1.f / 64.f);
            const float dx = v.x - mean, dy = v.y - mean;
            const float var = warp_sum(dx * dx + dy * dy) * (1.f / 64.f);  // biased, as LayerNorm
            const float rstd = 1.f / sqrtf(var + eps);
            acc += (dx * rstd * g.x + be.x) + (dy * rstd * g.y + be.y);
        }
    const float v = acc * 0.125f;  // the 2x2x2 average
    y[r * 32 + lane] = 0.5f * v * (1.f + erff(v * 0.70710678118654752f));  // GELU, erf form
}""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, sum_weight, norm_shape, pool_kernel_size):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.sum_weight = nn.Parameter(torch.tensor(sum_weight))
        self.norm = nn.LayerNorm(norm_shape)
        self.avg_pool = nn.AvgPool3d(kernel_size=pool_kernel_size)
        self.gelu = nn.GELU()

    def forward(self, x):
        c = self.conv_transpose
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # true fp32, as the check requires
        x = F.conv_transpose3d(x, c.weight, None, c.stride, c.padding, c.output_padding, c.groups,
                               c.dilation).contiguous()  # (B, C, 2D, 2H, 2W)
        torch.backends.cudnn.allow_tf32 = tf32
        N, C, D2, H2, W = x.shape
        pool = self.avg_pool
        if W != 64 or tuple(self.norm.normalized_shape) != (64,) or pool.kernel_size not in (2, (2, 2, 2)) \
                or pool.stride not in (2, (2, 2, 2)) or pool.padding not in (0, (0, 0, 0)) or N * C > 65535:
            x = self.norm(x + c.bias.view(1, -1, 1, 1, 1) + self.sum_weight)  # shapes this kernel does not cover
            return self.gelu(pool(x))
        y = x.new_empty(N, C, D2 // 2, H2 // 2, 32)
        _k.ln_pool_gelu(((H2 // 2 + 7) // 8, D2 // 2, N * C), 256, x.data_ptr(), c.bias.data_ptr(),
                        self.norm.weight.data_ptr(), self.norm.bias.data_ptr(), y.data_ptr(),
                        self.sum_weight.data_ptr(), C, D2, H2, float(self.norm.eps))
        return y
