"""The output is a constant: skip the transposed convolution, the mean and the softmax.

`mean(dim=1, keepdim=True)` leaves one channel, so `softmax(dim=1)` runs over a single element
and returns exp(v - v) / exp(v - v) = 1.0 exactly for every finite v; tanh(1) * scaling_factor
follows, the same value everywhere (2 tanh(1) ~= 1.5232), whatever the input, weights and bias.
So forward computes the output shape from the input and the layer's stride, padding, dilation,
kernel and output padding -- (16, 1, 31, 63, 63) here -- and writes that value with one
torch.full: a single fill of 7.9 MB (a few microseconds) instead of a 3-D transposed convolution
producing a 127 MB tensor and four more passes over it (mean, add, softmax, tanh, scale). Measured:
4.15x on H200 (0.70 -> 0.17 ms), far less than the traffic alone suggests: the fill takes a few
microseconds, but the call has fixed costs (the judge's floor, one trivial launch, reads 0.06 ms,
and this forward computes the constant on the host every call: a CPU tensor op and .item()). The
constant is computed as torch does it in fp32 (tanh of a float32 1.0, then times the factor).
Caveat: a NaN or inf input would give NaN in the reference and the constant here. The layer and bias
are kept so the parameters and state_dict match the reference.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, bias_shape, scaling_factor):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride, padding=padding)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.scaling_factor = scaling_factor

    def forward(self, x):
        c = self.conv_transpose
        size = [x.shape[0], 1]
        for i in range(3):  # ConvTranspose3d output size per spatial dim
            size.append((x.shape[2 + i] - 1) * c.stride[i] - 2 * c.padding[i]
                        + c.dilation[i] * (c.kernel_size[i] - 1) + c.output_padding[i] + 1)
        value = (torch.tanh(torch.tensor(1.0)) * self.scaling_factor).item()  # fp32, as torch does
        return torch.full(size, value, device=x.device, dtype=x.dtype)
