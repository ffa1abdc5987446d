"""The deep narrow MLP replayed from one CUDA graph: 17 tiny ops in a chain, nothing but launches.

Eight Linear(->50)+ReLU layers and a final Linear(50->10) on a (1, 1000) input: 17 ops, each a
kernel that finishes in a few microseconds. The weights are 68K floats (270 KB) and the math 68K
multiply-adds, so the GPU does essentially nothing; eagerly the call is 17 module calls, 17
dispatches and 17 launches in a row, and that host work is the whole time. cudal1.CudaGraph
records the 17 kernels at the first call; every later call is three launches (the copy of x into
the graph's input buffer, the graph, the clone of the (1, 10) output that makes each result a fresh
tensor). Inside the graph the kernels still run one after another (each layer needs the last), but
back to back on the GPU with no host in between. The same ops in the same order: the result is the
eager one. There is no convolution and matmuls are strict fp32 by default on both sides, so eager
already meets the strict tolerance: no TF32 race.

Measured on the H200: 2.96x vs eager (0.355 ms -> 0.120 ms), the largest gain of the three MLPs, as
this one has the most ops per unit of work. The judge's floor (one trivial launch between two
synchronizes, 0.0489 ms) is in both times: eager sits about 0.31 ms above it, the graph 0.07 ms.
"""
import torch.nn as nn

import cudal1


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_layer_sizes, output_size):
        super().__init__()
        layers = []
        cur = input_size
        for h in hidden_layer_sizes:
            layers.append(nn.Linear(cur, h))
            layers.append(nn.ReLU())
            cur = h
        layers.append(nn.Linear(cur, output_size))  # no activation on the output
        self.network = nn.Sequential(*layers)  # the task's names: network.0.weight ... network.16.bias
        self.graph = cudal1.CudaGraph(self.network)  # captured at the first CUDA call (the CPU runs it as is)

    def forward(self, x):
        return self.graph(x)  # (1, 1000) -> (1, 10)
