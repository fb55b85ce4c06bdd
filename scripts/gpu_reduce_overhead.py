"""Launch-bound inference on a GPU: the bench's NanoGPT (12 layers, bf16) at batch 1, 32 tokens,
eager beside torch.compile and kiln, each with mode="default" and mode="reduce-overhead" (CUDA
graphs). Prints median ms per call and the error of a later call against eager.

    python3 scripts/gpu_reduce_overhead.py"""
import os
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for p in (os.path.join(ROOT, "..", "shared", "bench"), os.path.join(ROOT, "shared", "bench")):
    if os.path.isdir(p):
        sys.path.insert(0, p)
sys.path.insert(0, ROOT)

import kiln  # noqa: E402
from suite import NanoGPT  # noqa: E402


def timed(fn, ids, n=50):
    ts = []
    for _ in range(n):
        torch.cuda.synchronize()
        t = time.perf_counter()
        fn(ids)
        torch.cuda.synchronize()
        ts.append((time.perf_counter() - t) * 1e3)
    return statistics.median(ts)


def main():
    torch.manual_seed(0)
    m = NanoGPT(12, 768, 12).to("cuda", torch.bfloat16).eval()
    ids = [torch.randint(0, 8192, (1, 32), device="cuda") for _ in range(4)]
    runs = {"eager": m}
    for mode in ("default", "reduce-overhead"):
        runs[f"kiln {mode}"] = kiln.compile(m, mode=mode)
        runs[f"inductor {mode}"] = torch.compile(m, mode=mode)
    print("compiler | ms | speedup | relerr (4th call)")
    with torch.no_grad():
        ref = m(ids[3]).float()
        base = None
        for name, fn in runs.items():
            for i in range(4):
                out = fn(ids[i])
            err = ((out.float() - ref).norm() / ref.norm()).item()
            ms = timed(fn, ids[0])
            base = base or ms
            print(f"{name} | {ms:.3f} | {base / ms:.2f} | {err:.2e}")


if __name__ == "__main__":
    main()
