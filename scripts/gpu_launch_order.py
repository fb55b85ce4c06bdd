"""One call of a bench case, launch by launch, for kiln and inductor side by side: each kernel's
device time in launch order (median over several calls), the gaps between kernels, and the
generated code of both compilers, so that the two can be matched kernel for kernel.

    python3 scripts/gpu_launch_order.py resnet18 --out DIR [--iters 20] [--compilers kiln,inductor]

Writes DIR/launches_<compiler>.txt (order, start offset, device us, gap before, name) and
DIR/code_<compiler>.txt (kiln's CUDA source; inductor's output code), prints a summary: device
time, busy time, idle gaps and wall per call."""
import argparse
import glob
import json
import os
import statistics
import sys
import tempfile

import gpu_common  # noqa: E402  (kiln and the bench suite on sys.path)

os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="ind_cache_"))

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402


def launches(fn, args, iters, trace_path):
    """Per call: list of (start us from the call's first kernel, dur us, name) from a chrome trace."""
    with torch.no_grad():
        for _ in range(5):
            fn(*args)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
            for _ in range(iters):
                with torch.profiler.record_function("CALL"):
                    fn(*args)
                torch.cuda.synchronize()
    prof.export_chrome_trace(trace_path)
    with open(trace_path) as f:
        ev = json.load(f)["traceEvents"]
    kern = sorted((e for e in ev if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")),
                  key=lambda e: e["ts"])
    calls = sorted((e for e in ev if e.get("ph") == "X" and e.get("name") == "CALL" and e.get("cat") == "user_annotation"),
                   key=lambda e: e["ts"])
    # Assign each kernel to a call by its correlated launch time: kernels of a call start after the
    # call's host start; take calls' starts as boundaries.
    starts = [c["ts"] for c in calls] + [float("inf")]
    per = [[] for _ in calls]
    ci = 0
    for k in kern:
        while ci + 1 < len(calls) and k["ts"] >= starts[ci + 1]:
            ci += 1
        per[ci].append(k)
    return per, calls


def summarize(name, per, calls, out):
    n = min(len(p) for p in per)
    counts = {len(p) for p in per}
    rows = []
    for j in range(n):
        durs = [p[j]["dur"] for p in per if len(p) == n]
        gaps = [p[j]["ts"] - (p[j - 1]["ts"] + p[j - 1]["dur"]) if j else 0.0 for p in per if len(p) == n]
        rows.append((statistics.median(durs), statistics.median(gaps), per[0][j]["name"],
                     per[0][j].get("args", {}).get("grid"), per[0][j].get("args", {}).get("block")))
    busy = [sum(k["dur"] for k in p) for p in per]
    span = [p[-1]["ts"] + p[-1]["dur"] - p[0]["ts"] for p in per if p]
    lead = [p[0]["ts"] - c["ts"] for p, c in zip(per, calls) if p]
    with open(os.path.join(out, f"launches_{name}.txt"), "w") as f:
        f.write(f"# {name}: launches per call {sorted(counts)}; busy {statistics.median(busy):.1f} us, "
                f"span {statistics.median(span):.1f} us, first kernel {statistics.median(lead):.1f} us after the call's host start\n")
        t = 0.0
        for j, (d, g, nm, grid, block) in enumerate(rows):
            t += g
            f.write(f"{j:3d} {t:8.1f} {d:7.1f} gap {g:5.1f}  {nm[:150]}  grid={grid} block={block}\n")
            t += d
    print(f"{name}: {n} launches/call (counts {sorted(counts)}), busy {statistics.median(busy):.1f} us, "
          f"span {statistics.median(span):.1f} us, gaps {statistics.median(span) - statistics.median(busy):.1f} us, "
          f"first kernel after host start {statistics.median(lead):.1f} us")
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case")
    ap.add_argument("--out", required=True)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--compilers", default="kiln,inductor")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(0)
    model, args, _ = gpu_common.case(a.case)
    with torch.no_grad():
        ref = model(*args)
    for comp in a.compilers.split(","):
        if comp == "kiln":
            import kiln
            from kiln import _codegen
            fn = kiln.compile(model)
        elif comp == "eager":
            fn = model
        else:
            fn = torch.compile(model, mode=None if comp == "inductor" else comp.split(":", 1)[1])
        with torch.no_grad():
            got = fn(*args)
            err = ((got.double() - ref.double()).norm() / ref.double().norm()).item()
            print(f"{comp}: relerr {err:.2e}; wall per call {gpu_common.cuda_ms_per_call(fn, args):.4f} ms (events, back to back); "
                  f"synced {gpu_common.sync_ms(lambda: fn(*args), n=100, warmup=5):.4f} ms")
        per, calls = launches(fn, args, a.iters, os.path.join(tempfile.mkdtemp(), "t.json"))
        summarize(comp.replace(":", "_"), per, calls, a.out)
        with open(os.path.join(a.out, f"code_{comp.replace(':', '_')}.txt"), "w") as f:
            if comp == "kiln":
                for g in _codegen.GRAPHS:
                    f.write(f"// graph: {g.status}; {g.num_kernels} kernels, {g.num_externs} externs\n")
                    f.write(g.source)
            elif comp != "eager":
                files = [p for p in glob.glob(os.path.join(os.environ["TORCHINDUCTOR_CACHE_DIR"], "**", "*.py"), recursive=True)
                         if "def call(" in open(p).read()]
                for p in files:
                    f.write(f"# ==== {p}\n" + open(p).read())


if __name__ == "__main__":
    sys.exit(main())
