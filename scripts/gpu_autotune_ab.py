"""Bench cases under kiln's default mode beside mode="max-autotune-no-cudagraphs": ms per call
(CUDA events around 20 calls, median of 5), first-call seconds, and which configuration the
autotuner kept for each kernel (counted; "nocache" marks row kernels it preferred without the
register row cache).

    python3 scripts/gpu_autotune_ab.py [case ...]    (default: pointwise_ln softmax nanogpt)"""
import collections
import os
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
from kiln import _codegen  # noqa: E402
from suite import CASES  # noqa: E402


def per_call_ms(fn, args):
    for _ in range(3):
        fn(*args)
    torch.cuda.synchronize()
    walls = []
    for _ in range(5):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(20):
            fn(*args)
        e.record()
        torch.cuda.synchronize()
        walls.append(s.elapsed_time(e) / 20)
    return sorted(walls)[2]


def main():
    cases = sys.argv[1:] or ["pointwise_ln", "softmax", "nanogpt"]
    for case in cases:
        torch.manual_seed(0)
        model, args, _ = CASES[case]("cuda")
        with torch.no_grad():
            ref = model(*args)
            for mode in ("default", "max-autotune-no-cudagraphs"):
                kiln.reset()
                _codegen.GRAPHS.clear()
                cm = kiln.compile(model, mode=mode)
                t = time.perf_counter()
                out = cm(*args)
                torch.cuda.synchronize()
                first = time.perf_counter() - t
                err = ((out.float() - ref.float()).norm() / ref.float().norm()).item()
                ms = per_call_ms(cm, args)
                print(f"{case} | {mode} | {ms:.4f} ms | first {first:.2f} s | relerr {err:.1e}")
                if mode != "default":
                    for g in _codegen.GRAPHS:
                        status = g.autotune_status
                        kept = collections.Counter(part.split(": ", 1)[1] for part in status.split("; ") if ": " in part)
                        print(f"  kept: {dict(kept)}")


if __name__ == "__main__":
    main()
