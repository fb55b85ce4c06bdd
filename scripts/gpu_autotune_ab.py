"""Bench cases under kiln's default mode beside mode="max-autotune-no-cudagraphs": ms per call
(CUDA events around 20 calls, median of 5), first-call seconds, and which configuration the
autotuner kept for each kernel (counted; "nocache" marks row kernels it preferred without the
register row cache).

    python3 scripts/gpu_autotune_ab.py [case ...]    (default: pointwise_ln softmax nanogpt)"""
import collections
import sys
import time

import torch

import gpu_common  # noqa: E402  (kiln and the bench suite on sys.path)

import kiln  # noqa: E402
from kiln import _codegen  # noqa: E402
from suite import CASES  # noqa: E402


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
                ms = gpu_common.cuda_ms_per_call(cm, args)
                print(f"{case} | {mode} | {ms:.4f} ms | first {first:.2f} s | relerr {err:.1e}")
                if mode != "default":
                    for g in _codegen.GRAPHS:
                        status = g.autotune_status
                        kept = collections.Counter(part.split(": ", 1)[1] for part in status.split("; ") if ": " in part)
                        print(f"  kept: {dict(kept)}")


if __name__ == "__main__":
    main()
