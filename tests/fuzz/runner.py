"""Differential fuzz runner: generated programs, eager vs compiled, in crash-isolated workers.

    python -m tests.fuzz --seeds 0:300 --compiler kiln [--backend kiln|eager] [--jobs 2] [--out DIR]
    python -m tests.fuzz --seeds 0:300 --compiler torch-eager     # torch.compile(backend="eager")

Each program runs in a persistent worker process (tests/fuzz/worker.py, JSON over pipes) that
runs many programs in turn (resetting the compiler in between). A worker that dies is a `crash`
of the program it was running (with the signal), one that takes longer than --timeout a
`timeout`; either way a fresh worker takes over. Outcomes: pass, wrong, exception_mismatch,
crash, timeout (harness_error: the harness or compile() itself raised).
"""
from __future__ import annotations

import argparse
import json
import os
import queue
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter

from .generator import generate

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FAILURES = ("wrong", "exception_mismatch", "crash", "timeout", "harness_error")
OUTCOMES = ("pass",) + FAILURES


class Worker:
    def __init__(self, compiler="kiln", backend="kiln", startup_timeout=180.0):
        self.compiler, self.backend = compiler, backend
        self.log = tempfile.NamedTemporaryFile(prefix="kiln_fuzz_worker_", suffix=".log", delete=False)
        env = dict(os.environ)
        # The checkout is importable for tests.fuzz, after what PYTHONPATH and the current folder
        # hold: under scripts/sanitize.sh those put the sanitized kiln first (a worker started in
        # the checkout would import the uninstrumented in-place build).
        env["PYTHONPATH"] = (env["PYTHONPATH"] + os.pathsep if env.get("PYTHONPATH") else "") + ROOT
        env.setdefault("OMP_NUM_THREADS", "1")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.fuzz.worker", "--compiler", compiler, "--backend", backend],
            cwd=os.getcwd(), env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True, bufsize=1)
        msg = self._read(startup_timeout)
        if not msg or not msg.get("ready"):
            tail = self.stderr_tail()
            self.kill()
            raise RuntimeError(f"fuzz worker failed to start: {msg!r}\n{tail}")
        self.kiln_c = msg.get("kiln_C")  # the kiln._C the worker tests (the sanitized one under sanitize.sh)

    def _read(self, timeout):
        r, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not r:
            return "timeout"
        line = self.proc.stdout.readline()
        if not line:
            return None
        return json.loads(line)

    def stderr_tail(self, n=2000):
        try:
            with open(self.log.name, "rb") as fh:
                fh.seek(0, 2)
                size = fh.tell()
                fh.seek(max(0, size - n))
                return fh.read().decode(errors="replace")
        except OSError:
            return ""

    def run(self, seed, source, timeout=60.0):
        """Result dict; the worker is dead afterwards (self.alive False) on crash/timeout."""
        try:
            self.proc.stdin.write(json.dumps({"seed": seed, "source": source}) + "\n")
            self.proc.stdin.flush()
            msg = self._read(timeout)
        except (BrokenPipeError, OSError, ValueError):
            msg = None
        if msg == "timeout":
            self.kill()
            return {"seed": seed, "outcome": "timeout", "detail": f"no answer within {timeout:.0f}s",
                    "graphs": 0, "breaks": 0, "eager_error": False}
        if msg is None:
            rc = self.proc.wait()
            sig = ""
            if rc < 0:
                try:
                    sig = signal.Signals(-rc).name
                except ValueError:
                    sig = f"signal {-rc}"
            detail = f"worker died: {sig or f'exit code {rc}'}\n--- worker stderr tail ---\n{self.stderr_tail()}"
            self.cleanup()
            return {"seed": seed, "outcome": "crash", "signal": sig or f"exit {rc}", "detail": detail,
                    "graphs": 0, "breaks": 0, "eager_error": False}
        return msg

    @property
    def alive(self):
        return self.proc.poll() is None

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.cleanup()

    def cleanup(self):
        try:
            os.unlink(self.log.name)
        except OSError:
            pass

    def close(self):
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except Exception:  # noqa: BLE001
            self.proc.kill()
        self.cleanup()


def run_seeds(seeds, compiler="kiln", backend="kiln", jobs=2, timeout=60.0, out=None, progress=False):
    """Run programs for `seeds`; returns (list of result dicts sorted by seed, wall seconds)."""
    t0 = time.time()
    q = queue.Queue()
    for s in seeds:
        q.put(s)
    results = []
    lock = threading.Lock()
    errors = []

    def loop():
        w = None
        try:
            while True:
                try:
                    s = q.get_nowait()
                except queue.Empty:
                    break
                prog = generate(s)
                if w is None or not w.alive:
                    w = Worker(compiler, backend)
                res = w.run(s, prog.source, timeout)
                res["kiln_C"] = w.kiln_c
                res["source"] = prog.source
                res["expects_error"] = prog.expects_error
                res["training"] = "training" in prog.features
                if res["outcome"] in ("crash", "timeout"):
                    w = None
                with lock:
                    results.append(res)
                    if progress and res["outcome"] != "pass":
                        print(f"  seed {s}: {res['outcome']}: {res['detail'].splitlines()[0][:160]}", flush=True)
                    if out and res["outcome"] in FAILURES:
                        save_failure(out, res)
        except Exception as e:  # noqa: BLE001
            errors.append(e)
        finally:
            if w is not None:
                w.close()

    threads = [threading.Thread(target=loop) for _ in range(max(1, jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    results.sort(key=lambda r: r["seed"])
    return results, time.time() - t0


def save_failure(out, res):
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, f"seed{res['seed']}_{res['outcome']}.py")
    header = f"outcome: {res['outcome']}\n{res.get('detail', '')}".rstrip()
    with open(path, "w") as fh:
        fh.write('"""' + header.replace('"""', "'''").replace("\\", "\\\\") + '\n"""\n')
        fh.write(res["source"])
    return path


def summarize(results, wall, label=""):
    c = Counter(r["outcome"] for r in results)
    eager_err = sum(1 for r in results if r.get("eager_error"))
    graphs = sum(r.get("graphs", 0) for r in results)
    breaks = sum(r.get("breaks", 0) for r in results)
    lines = [f"fuzz summary {label}: {len(results)} programs in {wall:.1f}s",
             f"  kiln._C: {', '.join(sorted({str(r.get('kiln_C')) for r in results}))}",
             f"  {'outcome':<20}{'count':>7}"]
    for o in OUTCOMES:
        if c.get(o) or o in ("pass",) + FAILURES[:4]:
            lines.append(f"  {o:<20}{c.get(o, 0):>7}")
    lines.append(f"  {'(eager_error, passed)':<20}{eager_err:>7}  (both raised identically; {100 * eager_err / max(1, len(results)):.1f}%)")
    tr = [r for r in results if r.get("training")]
    if tr:
        ct = Counter(r["outcome"] for r in tr)
        lines.append(f"  {'(training programs)':<20}{len(tr):>7}  ("
                     + ", ".join(f"{o} {ct.get(o, 0)}" for o in OUTCOMES if ct.get(o) or o == "pass") + ")")
    lines.append(f"  {'graphs':<20}{graphs:>7}")
    lines.append(f"  {'graph_breaks':<20}{breaks:>7}")
    return "\n".join(lines)


def parse_seeds(spec):
    if ":" in spec:
        a, b = spec.split(":")
        return range(int(a), int(b))
    return [int(x) for x in spec.split(",")]


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="0:300", help="A:B (range) or a,b,c")
    ap.add_argument("--compiler", default="kiln", choices=["kiln", "torch-eager"])
    ap.add_argument("--backend", default="kiln", help="kiln backend (kiln|eager)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--out", default="/tmp/kiln_fuzz")
    ap.add_argument("--json", help="write all results (without sources) to this file")
    ap.add_argument("--kind", default="all", choices=["all", "training", "plain", "floats"],
                    help="only the training-step programs' seeds, only the others, or only the float-argument ones")
    a = ap.parse_args(argv)
    seeds = parse_seeds(a.seeds)
    if a.kind == "floats":
        from .floats import is_float_seed
        from .training import is_training_seed
        seeds = [s for s in seeds if is_float_seed(s) and not is_training_seed(s)]
    elif a.kind != "all":
        from .training import is_training_seed
        seeds = [s for s in seeds if is_training_seed(s) == (a.kind == "training")]
    out = os.path.join(a.out, a.compiler if a.compiler != "kiln" else f"kiln-{a.backend}")
    results, wall = run_seeds(seeds, a.compiler, a.backend, a.jobs, a.timeout, out, progress=True)
    print(summarize(results, wall, f"[{a.compiler}{'/' + a.backend if a.compiler == 'kiln' else ''}, seeds {a.seeds}]"))
    fails = [r for r in results if r["outcome"] in FAILURES]
    if fails:
        print(f"failing programs written to {out}/ :")
        for r in fails:
            print(f"  seed {r['seed']:>5} {r['outcome']:<19} {r['detail'].splitlines()[0][:150]}")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump([{k: v for k, v in r.items() if k != "source"} for r in results], fh, indent=1)
    return 1 if fails else 0
