"""VGG-19 replayed from one CUDA graph, convs in strict fp32: compute-bound, and slower than eager's
TF32 convs, which on this task would have passed the strict check anyway.

At batch 10 and 224x224: 16 3x3 convs in five stages (2, 2, 4, 4, 4), each followed by ReLU, five 2x2
maxpools, then Linear(25088->4096), ReLU, Linear(4096->4096), ReLU, Linear(4096->1000); the two
Dropout(p=0.0) are the identity even in training mode and are not called. The convs are 195 G
multiply-adds (390 GFLOP); the classifier's weights are 123.6M floats (495 MB, ~0.1 ms of HBM reads
at 4.8 TB/s for GEMMs with M = 10); the first stage's activations are 128 MB each. Eagerly that is
~60 kernels (PyTorch adds each conv's bias in a kernel of its own after cuDNN returns), most of
them long: the host issues them well ahead of the GPU, so there is little launch time to win.
cudal1.CudaGraph records the forward anyway, since here it costs almost nothing (a copy of the 6 MB
input, a clone of the (10, 1000) output) and it removes whatever host gaps remain between the
short kernels of the last stages and the classifier.

The precision choice decides this task: forward turns cudnn.allow_tf32 off around the graph call
(cuDNN picks its kernels at the first call's warm-up and capture, so the graph replays fp32 convs),
while the eager reference is timed with cuDNN's TF32 tensor cores. 390 GFLOP is 5.8 ms at the
H200's 67 TFLOP/s fp32 peak (datasheet); counting the whole call, the strict forward runs at about
28 TFLOP/s and eager at about 104. Measured on the H200: 0.27x vs eager (3.76 ms -> 14.0 ms), slower.
Yet eager's own TF32 error is only 0.22 of the strict tolerance here: eager already meets it, so
the fp32 was not needed to pass. To win, keep cuDNN's default TF32 as eager does (a 4x margin on
the judge's inputs) and race eager on equal math with the graph, or use tensor-core GEMMs exact
to fp32 (3xTF32). The Linears are fp32 on both sides (matmul TF32 is off by default). The result
is Model.forward's, op for op.
"""
import torch
import torch.nn as nn

import cudal1


class ModelNew(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        layers = []
        in_ch = 3
        for out_ch, n in zip([64, 128, 256, 512, 512], [2, 2, 4, 4, 4]):
            for _ in range(n):
                layers += [nn.Conv2d(in_ch, out_ch, kernel_size=3, padding=1), nn.ReLU(inplace=True)]
                in_ch = out_ch
            layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(
            nn.Linear(512 * 7 * 7, 4096),
            nn.ReLU(inplace=True),
            nn.Dropout(p=0.0),  # kept for the module layout (and the indices); never called
            nn.Linear(4096, 4096),
            nn.ReLU(inplace=True),
            nn.Dropout(p=0.0),
            nn.Linear(4096, num_classes),
        )
        self.graph = cudal1.CudaGraph(self.body)  # captured at the first CUDA call (the CPU runs body as is)

    def body(self, x):
        x = torch.flatten(self.features(x), 1)  # (B, 512, 7, 7) -> (B, 25088)
        c = self.classifier
        x = c[1](c[0](x))  # dropout(p=0.0) is the identity: skipped
        x = c[4](c[3](x))
        return c[6](x)  # (B, 1000)

    def forward(self, x):
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # strict fp32 convs, fixed into the graph when it is captured
        try:
            return self.graph(x)
        finally:
            torch.backends.cudnn.allow_tf32 = tf32
