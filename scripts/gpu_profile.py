"""Where a bench case's time goes on a GPU, eager beside kiln: the top CUDA kernels by device
time under torch.profiler, and kiln's launch records (kernel, pattern, grid, block).

    python3 scripts/gpu_profile.py nanogpt [--iters 10] [--top 25] [--inductor]   (also nanogpt_b1: batch 1, 32 tokens)

Each compiler's wall time per call (events around 20 calls, after warm-up) is printed too.

Reads the bench suite from ../shared/bench or shared/bench (copy it there for a lent machine)."""
import argparse
import re
import sys

import torch
from torch.profiler import ProfilerActivity, profile

import gpu_common  # noqa: E402  (kiln and the bench suite on sys.path)

import kiln  # noqa: E402
from kiln import _codegen  # noqa: E402
from suite import CASES  # noqa: E402


def top_kernels(fn, args, iters, top):
    with torch.no_grad():
        print(f"  wall per call: {gpu_common.cuda_ms_per_call(fn, args):.3f} ms (median of 5 x 20 calls)")
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(iters):
                fn(*args)
            torch.cuda.synchronize()
    rows = [(e.key, e.device_time_total / iters, e.count // iters) for e in prof.key_averages() if e.device_time_total > 0]
    rows.sort(key=lambda r: -r[1])
    total = sum(r[1] for r in rows)
    print(f"  device time per call: {total / 1e3:.3f} ms over {sum(r[2] for r in rows)} launches")
    kinds = {}
    for name, us, n in rows:
        k = ("matmul" if ("gemm" in name or "nvjet" in name or "cutlass" in name) else "kiln" if re.match(r"kernel\d+", name)
             else "triton" if name.startswith("triton") else "memset/copy" if name.startswith(("Memset", "Memcpy")) else "aten")
        t, c = kinds.get(k, (0.0, 0))
        kinds[k] = (t + us, c + n)
    print("  by kind: " + ", ".join(f"{k} {t:.1f} us x{c}" for k, (t, c) in sorted(kinds.items(), key=lambda kv: -kv[1][0])))
    for name, us, n in rows[:top]:
        print(f"  {us:9.1f} us  x{n:<4} {name[:110]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--inductor", action="store_true", help="profile torch.compile's default mode too")
    a = ap.parse_args()
    torch.manual_seed(0)
    if a.case == "nanogpt_b1":  # launch-bound decoding size: batch 1, 32 tokens
        from suite import NanoGPT
        model, args = NanoGPT(12, 768, 12).to("cuda", torch.bfloat16).eval(), (torch.randint(0, 8192, (1, 32), device="cuda"),)
    else:
        model, args, _ = CASES[a.case]("cuda")
    args = args if isinstance(args, tuple) else tuple(args)[0]
    print(f"== {a.case}: eager")
    top_kernels(model, args, a.iters, a.top)
    compiled = kiln.compile(model)
    print(f"== {a.case}: kiln")
    top_kernels(compiled, args, a.iters, a.top)
    for g in _codegen.GRAPHS:
        print(f"  graph: {g.status}; {g.num_kernels} kernels, {g.num_externs} externs")
        for line in g.source.splitlines():
            if line.startswith("//   kernel"):
                print("   " + line[4:])
    if a.inductor:
        print(f"== {a.case}: inductor")
        top_kernels(torch.compile(model), args, a.iters, a.top)


if __name__ == "__main__":
    main()
