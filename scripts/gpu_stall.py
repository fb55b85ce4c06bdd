"""Where a varying-shape case's first compiled run at each size loses its time (dyn_seq's host
stall): the bench's call sequence (every shape once, three warm-up calls, then timed rounds of
every shape, each call synchronized), with per call the time until it returned and until the
device finished; the first timed round under torch.profiler (host events), listing the host
operators that took longest in any single call.

    python3 scripts/gpu_stall.py [--case dyn_seq] [--rounds 2] [--compiler kiln|inductor|eager] [--no-profile]
    python3 scripts/gpu_stall.py --lt        # cuBLASLt epilogue matmuls at new M, fresh process

--lt: eager addmm + gelu at every M of dyn_seq's fc layer first (as kiln's traced first calls run),
then _addmm_activation at each M: the first call's host time against the second's."""
import argparse
import os
import statistics
import time

import torch

import gpu_common  # noqa: E402,F401  (kiln and the bench suite on sys.path)


def synced(fn, args):
    torch.cuda.synchronize()
    t = time.perf_counter()
    fn(*args)
    host = (time.perf_counter() - t) * 1e3
    torch.cuda.synchronize()
    return host, (time.perf_counter() - t) * 1e3


def lt_probe():
    d = 768
    ms = [8 * t for t in range(256, 256 + 16 * 32, 32)]
    w = torch.randn(4 * d, d, device="cuda", dtype=torch.bfloat16)
    bias = torch.randn(4 * d, device="cuda", dtype=torch.bfloat16)
    xs = {m: torch.randn(m, d, device="cuda", dtype=torch.bfloat16) for m in ms}
    for m in ms:  # what the traced first calls run
        torch.nn.functional.gelu(torch.addmm(bias, xs[m], w.t()), approximate="tanh")
    torch.cuda.synchronize()
    rows = []
    for m in ms:
        a = synced(lambda: torch._addmm_activation(bias, xs[m], w.t(), use_gelu=True), ())
        b = synced(lambda: torch._addmm_activation(bias, xs[m], w.t(), use_gelu=True), ())
        rows.append((m, a, b))
    print("== _addmm_activation(gelu) at new M after eager addmm+gelu there: host/sync ms, first call then second")
    for m, a, b in rows:
        print(f"  M {m:5d}: first {a[0]:7.3f}/{a[1]:7.3f}  second {b[0]:7.3f}/{b[1]:7.3f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", default="dyn_seq")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--compiler", default="kiln")
    ap.add_argument("--no-profile", action="store_true")
    ap.add_argument("--lt", action="store_true")
    a = ap.parse_args()
    if a.lt:
        return lt_probe()
    from suite import CASES
    torch.manual_seed(0)
    model, sets, _ = CASES[a.case]("cuda")
    shapes = list(sets)
    if a.compiler == "kiln":
        import kiln
        kiln.reset()
        cm = kiln.compile(model)
    elif a.compiler == "eager":
        cm = model
    else:
        cm = torch.compile(model)
    out = os.environ.get("OUT")
    env = os.environ.get("CUDA_MODULE_LOADING", "")
    with torch.no_grad():
        t0 = time.perf_counter()
        first = [synced(cm, s) for s in shapes]
        all_s = time.perf_counter() - t0
        warm = [synced(cm, shapes[i]) for i in range(3)]
        rounds = []
        for r in range(a.rounds):
            if r == 0 and not a.no_profile:
                from torch.profiler import ProfilerActivity, profile, record_function
                with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                    row = []
                    for i, s in enumerate(shapes):
                        with record_function(f"call{i}"):
                            row.append(synced(cm, s))
                rounds.append(row)
            else:
                rounds.append([synced(cm, s) for s in shapes])
        eager = [synced(model, s) for s in shapes]
    tag = f"{a.compiler}{' CUDA_MODULE_LOADING=' + env if env else ''}{' no cuDNN SDPA' if gpu_common.NO_CUDNN_SDP else ''}"
    print(f"== {a.case} {tag}: first calls over {len(shapes)} shapes {all_s:.2f} s; first-call ms " +
          " ".join(f"{x[1]:.0f}" for x in first) + "; warm-up " + " ".join(f"{x[1]:.1f}" for x in warm))
    for r, row in enumerate(rounds):
        print(f"  round {r}{' (profiled)' if r == 0 and not a.no_profile else ''}: mean synced {statistics.mean(x[1] for x in row):.3f} ms")
        print("    returned " + " ".join(f"{x[0]:.2f}" for x in row))
        print("    synced   " + " ".join(f"{x[1]:.2f}" for x in row))
    print(f"  eager: mean synced {statistics.mean(x[1] for x in eager):.3f} ms")
    if a.compiler == "kiln":
        from kiln import _codegen
        for g in _codegen.GRAPHS:
            print(f"  graph {g.status[:40]!r}: size builds {g.num_size_builds}, served {g.num_sizes_served}, "
                  f"specialisations {g.num_specializations}; {g.size_status[:200]}")
            print("    seconds: " + ", ".join(f"{k} {v:.4f}" for k, v in g.timings.items() if isinstance(v, float)))
    if a.no_profile:
        return
    if out:
        prof.export_chrome_trace(os.path.join(out, f"stall_{a.case}_{a.compiler}.json"))
    # Per call: the host events (not the call marker) that took longest, with self time.
    calls = []
    evs = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CPU]
    for e in evs:
        if e.name.startswith("call") and e.name[4:].isdigit():
            calls.append(e)
    calls.sort(key=lambda e: e.time_range.start)
    print("  host events inside each profiled call (longest 4 by total, then self):")
    for c in calls:
        inside = [e for e in evs if e is not c and e.time_range.start >= c.time_range.start and e.time_range.end <= c.time_range.end]
        inside.sort(key=lambda e: -(e.time_range.end - e.time_range.start))
        tops = ", ".join(f"{e.name[:48]} {(e.time_range.end - e.time_range.start) / 1e3:.2f}" for e in inside[:4])
        selfs = sorted(inside, key=lambda e: -e.self_cpu_time_total)[:3]
        print(f"    {c.name}: {(c.time_range.end - c.time_range.start) / 1e3:.2f} ms | {tops} | self: " +
              ", ".join(f"{e.name[:40]} {e.self_cpu_time_total / 1e3:.2f}" for e in selfs))
    rows = [(e.key, e.cpu_time_total / 1e3, e.self_cpu_time_total / 1e3, e.count) for e in prof.key_averages()]
    rows.sort(key=lambda r: -r[2])
    print("  host self time over the round (ms total, count):")
    for k, tot, sf, n in rows[:15]:
        print(f"    {sf:8.2f} self {tot:8.2f} total x{n:<5} {k[:90]}")


if __name__ == "__main__":
    main()
