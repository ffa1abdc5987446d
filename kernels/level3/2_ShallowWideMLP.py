"""The shallow wide MLP replayed from one CUDA graph: two 2000-wide layers on one row are launch-bound.

Linear(1000->2000), ReLU, Linear(2000->2000), ReLU, Linear(2000->10) on a (1, 1000) input. At
batch 1 each Linear is a matrix-vector product: the cost is reading the weights once, 6.02M floats
(24 MB), about 5 us at the H200's 4.8 TB/s, and the three GEMVs cannot be fused (each needs the
previous one's whole output). Eagerly the five ops are five module calls, dispatches and launches
issued one after the other, and that host work, not the 5 us of weight reads, is the call.
cudal1.CudaGraph captures the five kernels at the first call; every later call is a copy of x
into the graph's input, one graph launch and a clone of the (1, 10) output, so the host work no
longer scales with the depth of the network. The ops are the same as eagerly, so the result is
the eager one. There is no convolution, and matmuls are strict fp32 by default on both sides:
eager already meets the strict tolerance, so there is no TF32 question.

Measured on the H200: 1.87x vs eager (0.173 ms -> 0.0924 ms). Of these, 0.0403 ms is the judge's
floor (one trivial launch between two synchronizes): eager sits about 0.13 ms above it and the
graph call about 0.05 ms, the three launches it keeps plus the weight reads. With five ops this
gains less than the 17-op deep narrow MLP does.
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
        self.network = nn.Sequential(*layers)  # the task's names: network.0.weight, ...
        self.graph = cudal1.CudaGraph(self.network)  # captured at the first CUDA call (the CPU runs it as is)

    def forward(self, x):
        return self.graph(x)  # (1, 1000) -> (1, 10)
