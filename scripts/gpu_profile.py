"""Where a bench case's time goes on a GPU, eager beside kiln: the top CUDA kernels by device
time under torch.profiler, and kiln's launch records (kernel, pattern, grid, block).

    python3 scripts/gpu_profile.py nanogpt [--iters 10] [--top 25] [--inductor]   (also nanogpt_b1 and resnet50: gpu_common.case)

Training cases (train_mlp, train_nanogpt) time the bench's step (forward, loss, backward) and
also list host time per step by profiler event.

Each compiler's wall time per call (events around 20 calls, after warm-up) is printed too.

Reads the bench suite from ../shared/bench or shared/bench (copy it there for a lent machine)."""
import argparse
import re

import torch
from torch.profiler import ProfilerActivity, profile

import gpu_common  # noqa: E402  (kiln and the bench suite on sys.path)

import kiln  # noqa: E402
from kiln import _codegen  # noqa: E402


def top_kernels(fn, args, iters, top, training=False, trace=None):
    with torch.enable_grad() if training else torch.no_grad():
        print(f"  wall per call: {gpu_common.cuda_ms_per_call(fn, args):.3f} ms (median of 5 x 20 calls)")
        with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU] if training else [ProfilerActivity.CUDA]) as prof:
            for _ in range(iters):
                fn(*args)
            torch.cuda.synchronize()
    if trace:
        prof.export_chrome_trace(trace)
    if training:  # host time: where a step's CPU time goes (autograd nodes, kiln's glue)
        cpu = [(e.key, e.cpu_time_total / iters, e.count // iters) for e in prof.key_averages() if e.cpu_time_total > 0]
        cpu.sort(key=lambda r: -r[1])
        print("  host (cpu_time_total per step, inclusive):")
        for name, us, n in cpu[:top]:
            print(f"    {us:9.1f} us  x{n:<4} {name[:100]}")
    rows = gpu_common.device_rows(prof, iters)
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
    ap.add_argument("--trace", help="write each compiler's chrome trace as TRACE_<compiler>.json")
    a = ap.parse_args()
    torch.manual_seed(0)
    model, args, training = gpu_common.case(a.case)
    wrap = (lambda fn: gpu_common.training_step(fn, model)) if training else (lambda fn: fn)
    print(f"== {a.case}: eager")
    top_kernels(wrap(model), args, a.iters, a.top, training, a.trace and a.trace + "_eager.json")
    compiled = kiln.compile(model)
    print(f"== {a.case}: kiln")
    top_kernels(wrap(compiled), args, a.iters, a.top, training, a.trace and a.trace + "_kiln.json")
    for g in _codegen.GRAPHS:
        print(f"  graph: {g.status}; {g.num_kernels} kernels, {g.num_externs} externs")
        for line in g.source.splitlines():
            if line.startswith("//   kernel"):
                print("   " + line[4:])
    if a.inductor:
        print(f"== {a.case}: inductor")
        top_kernels(wrap(torch.compile(model)), args, a.iters, a.top, training, a.trace and a.trace + "_inductor.json")


if __name__ == "__main__":
    main()
