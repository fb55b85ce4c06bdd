"""What kiln made of bench cases on a GPU: per captured graph its status (compiled, or why it runs
eagerly), kernels and extern calls, training status; ms per call beside eager and the top CUDA
kernels of a kiln call by device time.

    python3 scripts/gpu_status.py CASE [CASE ...]"""
import statistics
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

import gpu_common  # noqa: E402,F401  (kiln and the bench suite on sys.path)

import kiln  # noqa: E402
from kiln import _codegen  # noqa: E402
from suite import CASES  # noqa: E402


def main():
    for case in sys.argv[1:]:
        torch.manual_seed(0)
        kiln.reset()
        _codegen.GRAPHS.clear()
        model, args, training = CASES[case]("cuda")
        args = args if isinstance(args, tuple) else tuple(args)[0]
        c = kiln.compile(model)
        params = [p for p in model.parameters() if p.requires_grad]

        def step(fn):
            if not training:
                with torch.no_grad():
                    return fn(*args)
            for p in params:
                p.grad = None
            out = fn(*args)
            out = out if isinstance(out, torch.Tensor) else out[0]
            out.float().pow(2).mean().backward()

        def ms(fn):
            for _ in range(3):
                step(fn)
            ts = []
            for _ in range(10):
                torch.cuda.synchronize()
                t = time.perf_counter()
                step(fn)
                torch.cuda.synchronize()
                ts.append((time.perf_counter() - t) * 1e3)
            return statistics.median(ts)
        km, em = ms(c), ms(model)
        print(f"== {case}: kiln {km:.3f} ms, eager {em:.3f} ms")
        for g in _codegen.GRAPHS:
            print(f"  graph: {g.status[:300]} | kernels {g.num_kernels} externs {g.num_externs} | training: {g.training_status[:300]}")
        s = kiln.stats()
        for rec in s.get("codegen", [])[:6]:
            print("  codegen:", {k: (str(v)[:200]) for k, v in rec.items() if k in ("status", "reason", "training", "kernels")})
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            step(c)
            torch.cuda.synchronize()
        rows = sorted(((e.key, e.device_time_total, e.count) for e in prof.key_averages() if e.device_time_total > 0), key=lambda r: -r[1])
        print(f"  device time {sum(r[1] for r in rows) / 1e3:.3f} ms over {sum(r[2] for r in rows)} launches")
        for k, us, n in rows[:14]:
            print(f"  {us:9.1f} us x{n:<4} {k[:100]}")


if __name__ == "__main__":
    main()
