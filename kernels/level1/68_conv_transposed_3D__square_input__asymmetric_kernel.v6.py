"""3xTF32 ConvTranspose3d as a channels-last forward convolution, with the split in one kernel.

Run as the forward convolution it equals at stride 1, over three times the input channels ([hi, hi,
lo] of the input against [hi, lo, hi] of the weight, hi exact in TF32), a 3xTF32 transposed
convolution gets fp32 accuracy on the tensor cores, but that form pays twice for memory layout. The
split takes four elementwise passes (mask, subtract, concatenate) over the input, and the tensors
are NCHW while cuDNN's tensor-core kernels work in channels-last (NHWC) order, so cuDNN transposes
the 3x input and the output around the convolution. This version writes the split input once,
straight into channels-last order: one kernel reads each 32 x 32 tile of (channels, pixels) into
shared memory and writes every pixel's [hi | hi | lo] channel vector (coalesced on both sides), a
single pass of read 1x, write 3x the input. The cached weight is channels-last too, so cuDNN runs
its NHWC kernels directly and the output comes back channels-last: the same values and shape as
eager's, in another memory layout. Groups other than 1 and strides other than 1 take the NCHW path.
Measured on the H200: 0.87x vs eager (38.944 ms against 33.972 ms); the best other solution for this
task read 0.92x.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1

CUDA_SRC = r"""
#include <pybind11/pybind11.h>
#include <cuda_runtime.h>
#include <cstdint>
#include <stdexcept>
#include <string>

// x: (N, C, S) fp32, S = pixels; out: (N, S, 3C): out[n, s] = [hi(x[n, :, s]) | hi | lo], where hi
// keeps the top 11 significant bits (exact in TF32) and lo = x - hi (exact in fp32).
__global__ void split3_channels_last(const float* __restrict__ x, float* __restrict__ out, int C, int64_t S) {
    __shared__ float tile[32][33];  // +1 column: the transposed reads hit 32 different banks
    const int64_t s0 = (int64_t)blockIdx.x * 32;
    const int c0 = blockIdx.y * 32;
    const float* xn = x + (int64_t)blockIdx.z * C * S;
    float* on = out + (int64_t)blockIdx.z * S * 3 * C;
    for (int i = threadIdx.y; i < 32; i += 8) {  // read: 32 pixels of one channel per warp
        const int c = c0 + i;
        const int64_t s = s0 + threadIdx.x;
        tile[i][threadIdx.x] = (c < C && s < S) ? __ldg(xn + (int64_t)c * S + s) : 0.f;
    }
    __syncthreads();
    for (int i = threadIdx.y; i < 32; i += 8) {  // write: 32 channels of one pixel per warp, 3 times
        const int64_t s = s0 + i;
        const int c = c0 + threadIdx.x;
        if (s < S && c < C) {
            const float v = tile[threadIdx.x][i];
            const float hi = __uint_as_float(__float_as_uint(v) & 0xffffe000u);
            float* o = on + s * 3 * C;
            o[c] = hi;
            o[C + c] = hi;
            o[2 * C + c] = v - hi;
        }
    }
}

void split3(uintptr_t x, uintptr_t out, int64_t N, int64_t C, int64_t S, uintptr_t stream) {
    if (N == 0 || C == 0 || S == 0) return;
    dim3 grid((unsigned)((S + 31) / 32), (unsigned)((C + 31) / 32), (unsigned)N);
    split3_channels_last<<<grid, dim3(32, 8), 0, reinterpret_cast<cudaStream_t>(stream)>>>(
        reinterpret_cast<const float*>(x), reinterpret_cast<float*>(out), (int)C, S);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(std::string("split3: ") + cudaGetErrorString(e));
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("split3", &split3, "NCHW fp32 -> channels-last [hi | hi | lo] (3x the channels)");
}
"""

_ext = cudal1.load_kernel(CUDA_SRC, "cuda")


def split_tf32(t):
    """t = hi + lo, with hi exactly representable in TF32 (the low 13 mantissa bits cleared)."""
    hi = (t.view(torch.int32) & -8192).view(torch.float32)
    return hi, t - hi


def cat3(a, b, c, groups, dim):
    """Concatenate a, b, c along channel dim `dim`, group by group (so groups stay aligned)."""
    if groups == 1:
        return torch.cat((a, b, c), dim)
    s = a.shape
    g = s[:dim] + (groups, s[dim] // groups) + s[dim + 1:]
    out = torch.cat((a.reshape(g), b.reshape(g), c.reshape(g)), dim + 1)
    return out.reshape(s[:dim] + (3 * s[dim],) + s[dim + 1:])


def forward_weight(w, groups):
    """Transposed-conv weight (C_in, C_out/g, *k) -> the forward-conv weight (C_out, C_in/g, *k)."""
    cin, cout_g, *k = w.shape
    w = w.reshape(groups, cin // groups, cout_g, *k).transpose(1, 2).reshape(groups * cout_g, cin // groups, *k)
    return w.flip(list(range(2, w.dim())))  # the window, mirrored


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: tuple,
                 stride: tuple = (1, 1, 1), padding: tuple = (0, 0, 0),
                 output_padding: tuple = (0, 0, 0), groups: int = 1, bias: bool = False):
        super().__init__()
        self.conv_transpose3d = nn.ConvTranspose3d(in_channels, out_channels, kernel_size,
                                                   stride=stride, padding=padding,
                                                   output_padding=output_padding, groups=groups,
                                                   bias=bias)
        self.w3, self.w3_key = None, None  # the forward weight, split, and what it was made from

    def forward(self, x):
        c = self.conv_transpose3d
        pad = [d * (k - 1) - p for d, k, p in zip(c.dilation, c.kernel_size, c.padding)]
        plain = all(s == 1 for s in c.stride) and min(pad) >= 0 and c.groups == 1  # a forward conv
        # v3's path where the kernel does not apply; under autograd too (it cannot see through it)
        if not (plain and x.is_cuda and x.dtype == torch.float32) or torch.is_grad_enabled():
            return self.v3(x, c, pad)
        key = (c.weight._version, c.weight.data_ptr())
        if key != self.w3_key:
            wh, wl = split_tf32(forward_weight(c.weight, 1))
            w3 = torch.cat((wh, wl, wh), 1).contiguous(memory_format=torch.channels_last_3d)  # (C_out, 3 C_in, *k)
            self.w3, self.w3_key = w3, key
        x = x.contiguous()
        n, ch = x.shape[:2]
        x3 = torch.empty((n, 3 * ch) + x.shape[2:], device=x.device, memory_format=torch.channels_last_3d)
        _ext.split3(x.data_ptr(), x3.data_ptr(), n, ch, x[0, 0].numel(),
                    torch._C._cuda_getCurrentRawStream(x.device.index))
        return F.conv3d(x3, self.w3, c.bias, 1, pad, c.dilation, 1)  # channels-last in and out

    def v3(self, x, c, pad):
        """v3's path: the split with PyTorch ops in NCHW (any groups; stride 1 as a forward conv)."""
        xh, xl = split_tf32(x)
        x3 = cat3(xh, xh, xl, c.groups, 1)
        if any(s != 1 for s in c.stride) or min(pad) < 0:
            wh, wl = split_tf32(c.weight)
            return F.conv_transpose3d(x3, cat3(wh, wl, wh, c.groups, 0), c.bias, c.stride, c.padding,
                                      c.output_padding, c.groups, c.dilation)
        wh, wl = split_tf32(forward_weight(c.weight, c.groups))
        return F.conv3d(x3, torch.cat((wh, wl, wh), 1), c.bias, 1, pad, c.dilation, c.groups)
