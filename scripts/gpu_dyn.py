"""Where dyn_seq's time goes on a GPU: kiln with runtime sizes beside kiln compiled for one length.

    python3 scripts/gpu_dyn.py [--case dyn_seq] [--at 8,15] [--rounds 4]

1. The bench's call sequence (every shape once, three warm-up calls, then rounds over every
   shape), each call synchronized as the bench times it: ms per call per shape and round, so a
   call that ran op by op (a size left to its own build) or waited for a build shows; per call
   also when it returned, its device time between events and the CUDA segments it allocated.
2. How each graph serves its sizes (size_status, builds, specialisations).
3. At the shapes named by --at: wall per call (CUDA events, back to back), synchronized wall per
   call, host time per call, and device time per kernel (torch.profiler), for kiln after the
   sequence (runtime sizes) and kiln compiled at that shape alone (dynamic=False).
With $OUT set, each graph's program and generated source is written there for reading offline.

Seen on an H200 (torch 2.11+cu130), dyn_seq, after row kernels over a runtime length got their
row cache (cuda_codegen.cpp, symbolic_row_groups):
- one build serves all 16 lengths (0 specialised); at length 512 the runtime-size kernels take
  2.785 ms of device time per call against 2.664 ms for kiln compiled at 512 alone (matmuls equal;
  the 12 masked softmax kernels 42.8 against 34.5 us each, the q/k/v copies within 3-8 us).
- synchronized calls over every length, mean: 4.76-5.11 ms in the first round after each length's
  first call, 3.37-3.41 ms in the second (eager 6.6-6.8). The first round's excess is a few
  lengths (256, 352, 384, 448; the same in two processes) whose first compiled run takes 7-9 ms
  instead of 2-3: the call itself returns only after 6-8 ms (a host-side stall, the device idle),
  no CUDA segment is allocated, and CUDA_MODULE_LOADING=EAGER leaves it as it is. The first call
  at a length is a traced (eager ATen) run, so the compiled run, with its cuBLASLt bias+GELU
  epilogue matmuls (_addmm_activation, never run by the trace), first happens at the second call:
  the bench's one timed round (20 iterations over 16 lengths) is the first compiled run of 14
  of its 16 lengths (dyn_seq 6.16 ms there, nanogpt 3.27 ms).
- the stall is cuBLASLt's first _addmm_activation at a new M (7-11 ms at M = 8 x 256..448, 0.2 ms
  at longer ones; scripts/gpu_stall.py --lt). A size's first (traced) call now also runs its
  compiled graph once (codegen_bindings.cpp, first_sized_run): bench round 3.59 ms, inductor 5.24."""
import argparse
import os
import re
import time

import torch

import gpu_common  # noqa: E402  (kiln and the bench suite on sys.path)

import kiln  # noqa: E402
from kiln import _codegen  # noqa: E402
from suite import CASES  # noqa: E402


def synced_call(fn, args, notes=None):
    """Wall ms of one call, the device synchronized before and after; with `notes`, appends
    (ms until the call returned, device ms between events around it, CUDA segments allocated)."""
    torch.cuda.synchronize()
    seg = torch.cuda.memory_stats().get("segment.all.allocated", 0) if notes is not None else 0
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t = time.perf_counter()
    s.record()
    fn(*args)
    e.record()
    host = (time.perf_counter() - t) * 1e3
    torch.cuda.synchronize()
    wall = (time.perf_counter() - t) * 1e3
    if notes is not None:
        notes.append((host, s.elapsed_time(e), torch.cuda.memory_stats().get("segment.all.allocated", 0) - seg))
    return wall


def kind(name):
    if "gemm" in name or "nvjet" in name or "cutlass" in name or "xmma" in name:
        return "matmul"
    if re.match(r"kernel\d+", name):
        return "kiln"
    return "memset/copy" if name.startswith(("Memset", "Memcpy")) else "aten"


def report(label, fn, args, out_rows):
    with torch.no_grad():
        ev = gpu_common.cuda_ms_per_call(fn, args)
        sy = gpu_common.sync_ms(lambda: fn(*args), n=30, warmup=3)
        host = gpu_common.host_us(lambda: fn(*args), n=20)
        rows = gpu_common.kernel_rows(fn, args)
    total = sum(r[1] for r in rows)
    kinds = {}
    for name, us, n in rows:
        t, c = kinds.get(kind(name), (0.0, 0))
        kinds[kind(name)] = (t + us, c + n)
    print(f"  {label}: events {ev:.3f} ms, synced {sy:.3f} ms, host {host:.0f} us, device {total / 1e3:.3f} ms over "
          f"{sum(r[2] for r in rows)} launches; " + ", ".join(f"{k} {t:.0f} us x{c}" for k, (t, c) in sorted(kinds.items(), key=lambda kv: -kv[1][0])))
    for name, us, n in rows[:14]:
        print(f"    {us:8.1f} us x{n:<4} {name[:100]}")
    out_rows.append((label, rows))


def dump(path, graphs):
    with open(path, "w") as f:
        for g in graphs:
            f.write(f"==== graph: status {g.status!r}\n==== sizes: {g.size_status}\n==== program\n{g.program_text}\n==== source\n{g.source}\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", default="dyn_seq")
    ap.add_argument("--at", default="8")
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    torch.manual_seed(0)
    out = os.environ.get("OUT")
    model, sets, _ = CASES[a.case]("cuda")
    shapes = list(sets)
    names = [tuple(t.shape[1] if t.dim() > 1 else t.shape[0] for t in s[:1])[0] for s in shapes]
    kiln.reset()
    cm = kiln.compile(model)
    tables = []
    with torch.no_grad():
        first = [synced_call(cm, s) for s in shapes]
        warm = [synced_call(cm, shapes[i]) for i in range(3)]
        notes = [[] for _ in range(a.rounds)]
        rounds = [[synced_call(cm, s, notes[r]) for s in shapes] for r in range(a.rounds)]
        eager = [synced_call(model, s) for s in shapes]
    print(f"== {a.case}: {len(shapes)} shapes {names}")
    print("  first calls ms: " + " ".join(f"{x:.0f}" for x in first) + f"; warm-up {' '.join(f'{x:.1f}' for x in warm)}")
    for r, row in enumerate(rounds):
        print(f"  round {r}: mean {sum(row) / len(row):.3f} ms: " + " ".join(f"{x:.2f}" for x in row))
        print("    returned after ms: " + " ".join(f"{h:.2f}" for h, _, _ in notes[r]) + "\n    device ms (events): " +
              " ".join(f"{d:.2f}" for _, d, _ in notes[r]) + "\n    CUDA segments allocated: " + " ".join(str(n) for _, _, n in notes[r]))
    print(f"  eager:   mean {sum(eager) / len(eager):.3f} ms: " + " ".join(f"{x:.2f}" for x in eager))
    s = kiln.stats()
    print(f"  stats: graphs {s.get('graphs')}, recompiles {s.get('recompiles')}, compile_s {s.get('compile_s')}")
    dyn_graphs = list(_codegen.GRAPHS)
    for g in dyn_graphs:
        print(f"  graph {g.status[:60]!r}: kernels {g.num_kernels}, size builds {g.num_size_builds}, served {g.num_sizes_served}, "
              f"specialisations {g.num_specializations}\n    {g.size_status[:500]}\n    timings {dict(g.timings)}")
    if out:
        dump(os.path.join(out, f"dyn_{a.case}.txt"), dyn_graphs)
    at = [int(i) for i in a.at.split(",") if i]
    for i in at:
        print(f"== at shape {i} (length {names[i]})")
        report("kiln runtime sizes", cm, shapes[i], tables)
    for i in at:
        kiln.reset()
        cs = kiln.compile(model, dynamic=False)
        with torch.no_grad():
            cs(*shapes[i])
        print(f"== at shape {i} (length {names[i]}), compiled for it alone")
        report("kiln static", cs, shapes[i], tables)
        if out:
            dump(os.path.join(out, f"static_{a.case}_{names[i]}.txt"), list(_codegen.GRAPHS))
    if out:
        with open(os.path.join(out, "dyn_kernels.txt"), "w") as f:
            for label, rows in tables:
                f.write(f"== {label}\n")
                for name, us, n in rows:
                    f.write(f"{us:9.1f} us x{n:<4} {name}\n")


if __name__ == "__main__":
    main()
