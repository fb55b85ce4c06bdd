"""NVRTC compile time of one many-kernel CUDA graph by number of compile jobs (units compiled
concurrently), each in a fresh cache directory, alternating, after one warm-up compile.

    python3 scripts/gpu_nvrtc_jobs.py [--jobs 1,4,16] [--rounds 2] [--autotune]"""
import argparse
import sys
import tempfile

import torch
import torch.nn.functional as F

import gpu_common  # noqa: E402,F401  (kiln on sys.path)
from kiln import _C  # noqa: E402


def many(x):
    for i in range(16):
        x = torch.softmax(x * 1.5, dim=i % 2)
        x = F.layer_norm(F.gelu(x) + 1, (x.shape[-1],))
    return x


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", default="1,4,16")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--autotune", action="store_true")
    a = ap.parse_args()
    x = torch.randn(512, 768, device="cuda")
    _C.CodegenGraph(many, tempfile.mkdtemp(), None, True, False, 1)(x)  # NVRTC and CUDA warmed up
    for r in range(a.rounds):
        for j in (int(v) for v in a.jobs.split(",")):
            g = _C.CodegenGraph(many, tempfile.mkdtemp(), None, True, False, j, autotune=a.autotune)
            out = g(x)
            torch.cuda.synchronize()
            t = dict(g.timings)
            err = float((out - many(x)).norm() / many(x).norm())
            print(f"round {r} jobs {j:2}: {g.num_kernels} kernels, {int(t['cuda_units'])} units, compile {t['compile']:.3f} s"
                  + (f", autotune {t['autotune']:.3f} s" if "autotune" in t else "") + f", relerr {err:.1e}, {g.status[:60]}")


if __name__ == "__main__":
    main()
