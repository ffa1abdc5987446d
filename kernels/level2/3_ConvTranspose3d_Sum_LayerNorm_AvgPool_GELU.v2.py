"""ConvTranspose3d as three TF32 products in one cuDNN call (3xTF32), then one warp-per-row kernel
for the conv bias, + sum_weight, LayerNorm over the width, the 2x2x2 average pool and GELU.

The head is the cost here. The conv's output is (128, 64, 32, 64, 64), 1.07 G floats (4.3 GB), and
232 GFLOP. Eager runs it on TF32 tensor cores, 16x outside the strict tolerance, so a solution
must match true fp32; cuDNN's true-fp32 transposed conv runs on the CUDA
cores, ~8x slower at peak than TF32, and with it this same epilogue only tied eager (38.0 -> 37.6 ms
on the H200): the traffic the fused epilogue saves (~27 GB of eager's passes down to one 4.3 GB read
and a 0.54 GB write) was eaten by the slower head. 3xTF32 gets fp32 accuracy from the tensor cores:
split x = xh + xl and w = wh + wl, where xh and wh keep TF32's 10 mantissa bits exactly and the low
parts are at most 2^-10 of them; then x*w = xh*wh + xh*wl + xl*wh + xl*wl, and only the last term
(~2^-20 relative) is dropped. The three products run as one convolution over 96 input channels
instead of 32 (cudal1.conv_3xtf32): three times TF32's work, where fp32 would be ~8x. Task 34 has the
same conv output shape with a 4x4x4 kernel and reads 1.9x this way; here the kernel is 3x3x3, so the
head is cheaper still.

The epilogue: a warp owns an output row (n, c, od, oh); its 4 input rows (d = 2od + {0,1}, h = 2oh +
{0,1}) have 64 floats each, and lane l loads the float2 at w = 2l, 2l+1 -- exactly the pool pair of
output column l. Per row the warp adds the conv bias and sum_weight (read on the device: no host
sync), gets mean and biased variance from two shuffle reductions (two passes over registers),
normalizes with eps and the affine weight and bias, and adds into the lane's pool sum; then GELU (erf
form) of sum / 8 is stored, 32 coalesced floats. The conv output is read once and only the pooled
eighth written. Measured on the H100: 3.59x over eager (40.4 -> 11.3 ms).
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
        if c.groups != 1:  # conv_3xtf32 stacks its products as input channels: groups=1 only
            with cudal1.cudnn_tf32(False):  # true fp32, as the check requires
                return self.gelu(self.avg_pool(self.norm(c(x) + self.sum_weight)))
        x = cudal1.conv_3xtf32(F.conv_transpose3d, x, c.weight, None, stride=c.stride, padding=c.padding,
                               output_padding=c.output_padding, dilation=c.dilation).contiguous()  # (B, C, 2D, 2H, 2W)
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
