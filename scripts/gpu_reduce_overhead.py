"""Launch-bound inference on a GPU: the bench's NanoGPT (12 layers, bf16) at batch 1, 32 tokens,
eager beside torch.compile and kiln, each with mode="default" and mode="reduce-overhead" (CUDA
graphs). Prints median ms per call and the error of a later call against eager.

    python3 scripts/gpu_reduce_overhead.py"""
import statistics
import sys
import time

import torch

import gpu_common  # noqa: E402,F401  (kiln and the bench suite on sys.path)

import kiln  # noqa: E402
from suite import NanoGPT  # noqa: E402


def timed(fn, ids, n=50):
    """Latency: median of n calls, each synchronized."""
    ts = []
    for _ in range(n):
        torch.cuda.synchronize()
        t = time.perf_counter()
        fn(ids)
        torch.cuda.synchronize()
        ts.append((time.perf_counter() - t) * 1e3)
    return statistics.median(ts)


def throughput(fn, ids, n=50):
    """Back-to-back calls: CUDA events around n calls, ms per call."""
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(n):
        fn(ids)
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e) / n


def main():
    torch.manual_seed(0)
    m = NanoGPT(12, 768, 12).to("cuda", torch.bfloat16).eval()
    ids = [torch.randint(0, 8192, (1, 32), device="cuda") for _ in range(4)]
    runs = {"eager": m}
    for mode in ("default", "reduce-overhead"):
        runs[f"kiln {mode}"] = kiln.compile(m, mode=mode)
        runs[f"inductor {mode}"] = torch.compile(m, mode=mode)
    rounds = 7
    with torch.no_grad():
        ref = m(ids[3]).float()
        errs = {}
        for name, fn in runs.items():
            for i in range(4):
                out = fn(ids[i])
            errs[name] = ((out.float() - ref).norm() / ref.norm()).item()
        # Rounds interleave the compilers, so a slow phase of the host hits each of them alike.
        lat = {name: [] for name in runs}
        thr = {name: [] for name in runs}
        for _ in range(rounds):
            for name, fn in runs.items():
                lat[name].append(timed(fn, ids[0], 30))
                thr[name].append(throughput(fn, ids[0], 30))
    print(f"compiler | ms synced per call (median of {rounds} rounds: min..max) | ms back to back | speedup | relerr (4th call)")
    base = None
    for name in runs:
        ms = statistics.median(lat[name])
        base = base or ms
        print(f"{name} | {ms:.3f} ({min(lat[name]):.3f}..{max(lat[name]):.3f}) | {statistics.median(thr[name]):.3f} | {base / ms:.2f} | {errs[name]:.2e}")


if __name__ == "__main__":
    main()
