"""What the debug dump costs: a bench case compiled by kiln with KILN_DEBUG_DIR on and off.

    python tools/dump_cost.py [--case hf_bert] [--repeats 3] [--keep DIR]

Each run is a fresh process; all share one kernel cache, filled by a first untimed run, so the
C++ compiler's time (the same with or without the dump) does not drown the difference. Reported:
  first_s      wall time of the first call (capture, trace, lower, codegen, load, run)
  in_dump_s    time inside kiln/_debug.py's writers (the C++ sink call, graph_module.py, codegen
               files), timed around each call; 0 calls when the dump is off
  files, bytes the dump folder's size
Runs alternate off/on so that machine drift hits both alike."""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(os.path.dirname(os.path.dirname(HERE)), "shared", "bench")


def child(case, dump_dir):
    import torch
    torch.manual_seed(0)
    torch.set_num_threads(2)
    sys.path.insert(0, BENCH)
    from suite import CASES
    import kiln
    from kiln import _C, _debug

    spent = {"s": 0.0, "calls": 0}

    def timed(fn):
        def wrapper(*a, **k):
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                spent["s"] += time.perf_counter() - t0
                spent["calls"] += 1
        return wrapper

    _C.set_debug_sink(timed(_debug.record_capture))
    for name in ("steppable", "note_file", "record_codegen"):
        setattr(_debug, name, timed(getattr(_debug, name)))
    model, args, _ = CASES[case]("cpu")
    compiled = kiln.compile(model, options={"debug_dir": dump_dir} if dump_dir else None)
    with torch.no_grad():
        t0 = time.perf_counter()
        compiled(*args)
        first = time.perf_counter() - t0
    files = size = 0
    if dump_dir:
        for root, _, names in os.walk(dump_dir):
            files += len(names)
            size += sum(os.path.getsize(os.path.join(root, n)) for n in names)
    print("RESULT " + json.dumps({"first_s": first, "in_dump_s": spent["s"], "dump_calls": spent["calls"],
                                  "files": files, "bytes": size}))


def run(case, cache, dump_dir):
    env = dict(os.environ, KILN_CACHE_DIR=cache, PYTHONPATH=os.path.dirname(HERE))
    env.pop("KILN_DEBUG_DIR", None)
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--case", case] + (["--dump", dump_dir] if dump_dir else [])
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise SystemExit(out.stdout[-2000:] + out.stderr[-4000:])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", default="hf_bert")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--keep", default=None, help="leave the last dump in this folder")
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--dump", default=None)
    a = ap.parse_args()
    if a.child:
        return child(a.case, a.dump)
    work = tempfile.mkdtemp(prefix="kiln_dump_cost_")
    cache = os.path.join(work, "cache")
    run(a.case, cache, None)  # fills the kernel cache
    off, on = [], []
    for r in range(a.repeats):
        off.append(run(a.case, cache, None))
        d = a.keep if (a.keep and r == a.repeats - 1) else os.path.join(work, f"dump{r}")
        shutil.rmtree(d, ignore_errors=True)
        on.append(run(a.case, cache, d))
    med = lambda rs, k: statistics.median(x[k] for x in rs)  # noqa: E731
    runs = lambda rs: ", ".join(f"{x['first_s']:.3f}" for x in rs)  # noqa: E731
    print(f"{a.case}: dump off: first call {med(off, 'first_s'):.3f} s (runs {runs(off)}), "
          f"dump calls {max(x['dump_calls'] for x in off)}")
    print(f"{a.case}: dump on:  first call {med(on, 'first_s'):.3f} s (runs {runs(on)}), "
          f"{med(on, 'in_dump_s'):.3f} s inside the dump writers ({on[-1]['dump_calls']} calls), "
          f"{on[-1]['files']} files, {on[-1]['bytes'] / 1024:.0f} KiB")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
