"""The whole MLP replayed from one CUDA graph: a batch-1 forward of five small ops is all launch cost.

The network is Linear(1000->400), ReLU, Linear(400->800), ReLU, Linear(800->500) on one row. Its
weights are 1.12M floats (4.5 MB), about a microsecond of HBM traffic at 4.8 TB/s, and the math is
1.1M multiply-adds: the GPU is idle almost all of the call. Eagerly each of the five ops is an
nn.Module call, an operator dispatch and a launch (a Linear is one addmm: a cuBLAS kernel, with a
bias copy before it where cuBLASLt's bias epilogue is not used; a ReLU one elementwise kernel), so
the call is five trips through the host stack, one after the other. cudal1.CudaGraph records the
same kernels once, at the first call, and then each call is three launches: the copy of x into the
graph's input buffer, one graph launch for the whole network, and the clone of the (1, 500) output
(a fresh tensor every call, as the judge requires). The ops and their order are unchanged, so the
result is the eager network's. There is no convolution, and matmuls are strict fp32 by default on
both sides (no TF32): eager already meets the strict tolerance, so there is no precision race.

Measured on the H200: 1.85x vs eager (0.166 ms -> 0.0901 ms). The judge's floor (one trivial launch
between two synchronizes, 0.0407 ms) is part of both times: eager sits about 0.13 ms above it, the
graph call about 0.05 ms, which is why the ratio stays far short of the ratio of launch counts.
"""
import torch.nn as nn

import cudal1


class ModelNew(nn.Module):
    def __init__(self, input_size, layer_sizes, output_size):
        super().__init__()
        layers = []
        cur = input_size
        for size in layer_sizes:
            layers.append(nn.Linear(cur, size))
            layers.append(nn.ReLU())
            cur = size
        layers.append(nn.Linear(cur, output_size))  # no activation on the output
        self.network = nn.Sequential(*layers)  # the same names as the task's: network.0.weight, ...
        self.graph = cudal1.CudaGraph(self.network)  # captured at the first CUDA call (the CPU runs it as is)

    def forward(self, x):
        return self.graph(x)  # (1, 1000) -> (1, 500)
