"""ResNet-50, fp32, batch 32, 224x224, inference: the issue's other ResNet row, which the bench does
not carry. torchvision's resnet50 where the machine has torchvision (weights random), else the same
architecture written here (bottleneck blocks 3-4-6-3, widths 64..512, expansion 4). Eager beside
torch.compile and kiln in one process, each in its own order of first use: first call in seconds,
steady ms per call by CUDA events (gpu_common.cuda_ms_per_call), largest error against eager
relative to eager's largest magnitude, and kiln's graph count.

    python3 scripts/gpu_resnet50.py [--batch 32] [--compilers inductor,kiln] [--channels-last]"""
import argparse
import time

import torch
from torch import nn

import gpu_common  # noqa: F401  (kiln on sys.path)
import kiln


class Bottleneck(nn.Module):
    def __init__(self, cin, width, stride):
        super().__init__()
        cout = width * 4
        self.conv1, self.bn1 = nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width)
        self.conv2, self.bn2 = nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width)
        self.conv3, self.bn3 = nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = torch.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return torch.relu(y + (x if self.down is None else self.down(x)))


class ResNet50(nn.Module):
    def __init__(self, classes=1000):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        blocks, cin = [], 64
        for width, n, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            for i in range(n):
                blocks.append(Bottleneck(cin, width, stride if i == 0 else 1))
                cin = width * 4
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def model():
    try:
        import torchvision
        return torchvision.models.resnet50(), "torchvision"
    except Exception:  # noqa: BLE001  (no torchvision on the machine: the same network, written here)
        return ResNet50(), "written here"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--compilers", default="inductor,kiln")
    ap.add_argument("--channels-last", action="store_true")
    a = ap.parse_args()
    torch.manual_seed(0)
    m, source = model()
    m = m.cuda().eval()
    x = torch.randn(a.batch, 3, 224, 224, device="cuda")
    if a.channels_last:
        m, x = m.to(memory_format=torch.channels_last), x.to(memory_format=torch.channels_last)
    print(f"resnet50 ({source}), fp32, batch {a.batch}, channels_last={a.channels_last}")
    print("compiler | first call s | ms per call | vs eager | max rel err | graphs")
    with torch.no_grad():
        ref = m(x)
        eager_ms = gpu_common.cuda_ms_per_call(m, (x,))
        print(f"eager | - | {eager_ms:.3f} | 1.00 | - | -")
        for comp in a.compilers.split(","):
            if comp == "kiln":
                kiln.reset()
                g = kiln.compile(m)
            else:
                torch._dynamo.reset()
                g = torch.compile(m)
            torch.cuda.synchronize()
            t = time.perf_counter()
            out = g(x)
            torch.cuda.synchronize()
            first = time.perf_counter() - t
            err = ((out - ref).abs().max() / ref.abs().max()).item()
            ms = gpu_common.cuda_ms_per_call(g, (x,))
            graphs = kiln.stats().get("graphs", "-") if comp == "kiln" else "-"
            print(f"{comp} | {first:.2f} | {ms:.3f} | {eager_ms / ms:.2f} | {err:.2e} | {graphs}")


if __name__ == "__main__":
    main()
