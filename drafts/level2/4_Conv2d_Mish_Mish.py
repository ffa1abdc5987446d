"""Conv2d on cuDNN without its bias, then one kernel for conv bias + Mish + Mish.

Eager runs the cuDNN convolution, a separate add of the conv's own bias (PyTorch adds it after
cuDNN returns) and two Mish kernels: three passes that each read and write the (128, 16, 30, 30)
activation (7.4 MB). Here the conv runs with bias=None and one elementwise kernel adds the bias
and applies mish(mish(v)) in registers, mish(v) = v * tanh(log1p(exp(v))) as torch's CUDA kernel
writes it (exp overflowing to inf gives tanh(inf) = 1, i.e. mish(v) = v, as in torch). One read
and one write instead of three of each, and two launches fewer. The grid is (x, C, N), so the
channel comes from the block index. The conv runs with TF32 off (true
fp32). Small work, launch-bound: expect ~1.3-1.6x.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1

_k = cudal1.load_cuda(r"""
__device__ __forceinline__ float mish(float v) { return v * tanhf(log1pf(expf(v))); }

extern "C" __global__ void bias_mish2(const float* __restrict__ x, const float* __restrict__ cb,
        float* __restrict__ y, long long C, long long inner) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;  // index in the plane
    if (i >= inner) return;
    const long long c = blockIdx.y, plane = blockIdx.z * C + c;  // grid (x, C, N): no division
    y[plane * inner + i] = mish(mish(x[plane * inner + i] + cb[c]));
}""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        c = self.conv
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # true fp32, as the check requires
        x = F.conv2d(x, c.weight, None, c.stride, c.padding, c.dilation, c.groups).contiguous()
        torch.backends.cudnn.allow_tf32 = tf32
        N, C = x.shape[:2]
        inner = x[0, 0].numel()
        y = torch.empty_like(x)  # (B, C, H, W)
        _k.bias_mish2(((inner + 255) // 256, C, N), 256, x.data_ptr(), c.bias.data_ptr(), y.data_ptr(),
                      C, inner)
        return y
