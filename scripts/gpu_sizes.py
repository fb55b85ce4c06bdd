"""Runtime sizes on a GPU (issue 10 item 3): each varying-shape bench case (default dyn_seq,
decode_kv) compiled with kiln and run over its shapes twice, then how each graph serves its sizes
(size_status, builds, sizes served, specialisations) and the time per call at a few shapes for
eager and kiln (CUDA events, steady state).

    python3 scripts/gpu_sizes.py [case ...]"""
import os
import sys

import torch

from gpu_common import cuda_ms_per_call

import kiln  # noqa: E402
from kiln import _codegen  # noqa: E402
from suite import CASES  # noqa: E402


def main(cases):
    for name in cases:
        kiln.reset()
        model, sets, _ = CASES[name]("cuda")
        shapes = list(sets)
        cm = kiln.compile(model)
        with torch.no_grad():
            for _ in range(2):
                for args in shapes:
                    cm(*args)
            torch.cuda.synchronize()
            print(f"== {name}: {len(shapes)} shapes")
            for g in _codegen.GRAPHS:
                print(f"  graph {g.status[:40]!r}: kernels {g.num_kernels}, size builds {g.num_size_builds}, served {g.num_sizes_served}, "
                      f"specialisations {g.num_specializations}\n    {g.size_status[:400]}")
            for i in (0, len(shapes) // 2, len(shapes) - 1, len(shapes) // 2 + 1):
                args = shapes[i]
                e = cuda_ms_per_call(model, args)
                k = cuda_ms_per_call(cm, args)
                print(f"  shape {i}: eager {e:.3f} ms, kiln {k:.3f} ms")
            top(cm, shapes[len(shapes) // 2 + 1])
            out = os.environ.get("OUT")
            if out:  # the graphs' programs and generated source, for reading offline
                with open(os.path.join(out, f"source_{name}.txt"), "w") as f:
                    for g in _codegen.GRAPHS:
                        f.write(f"==== graph: {g.size_status}\n{g.program_text}\n{g.source}\n")


def top(fn, args, n=10):
    """kiln's device time per kernel at one shape (torch.profiler), and the host's wall per call."""
    from torch.profiler import ProfilerActivity, profile
    for _ in range(3):
        fn(*args)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            fn(*args)
        torch.cuda.synchronize()
    rows = [(e.key, e.device_time_total / 10, e.count // 10) for e in prof.key_averages() if e.device_time_total > 0]
    rows.sort(key=lambda r: -r[1])
    print(f"  kiln at shape {len(args)} args: device us per call {sum(r[1] for r in rows):.1f}")
    for k, us, c in rows[:n]:
        print(f"    {us:8.1f} us  x{c}  {k[:90]}")


if __name__ == "__main__":
    main(sys.argv[1:] or ["dyn_seq", "decode_kv"])
