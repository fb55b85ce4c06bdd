"""Run the break corpus under eager, kiln.compile and torch.compile(backend="eager") and compare.

    python -m tests.corpus.run [--backend eager|kiln] [--json out.json] [-k SUBSTRING]

Per program: two calls on fresh inputs; each compiled result must match eager's (tensor values
allclose with the same dtype/shape/requires_grad, Python values equal, printed text equal,
arguments mutated the same way, the same global side effects, the same exception type when eager
raises). Records kiln's graphs/breaks (with reasons) and Dynamo's unique graphs/graph breaks.
"""
import argparse
import collections
import contextlib
import copy
import dataclasses
import io
import json
import math
import os
import re
import sys
import time
import traceback

import numpy as np
import torch
import torch._dynamo
from torch._dynamo.utils import counters

import kiln
from tests.corpus import programs as P

CALLS = 2


# ---- comparison ---------------------------------------------------------------------------------
def diff(actual, expected, path="result"):
    """None when `actual` matches `expected`, else a one-line description of the first mismatch."""
    if type(actual) is not type(expected):
        return f"{path}: type {type(actual).__name__} != {type(expected).__name__}"
    if isinstance(expected, torch.Tensor):
        for attr in ("dtype", "shape", "requires_grad"):
            if getattr(actual, attr) != getattr(expected, attr):
                return f"{path}: {attr} {getattr(actual, attr)} != {getattr(expected, attr)}"
        try:
            torch.testing.assert_close(actual.detach(), expected.detach(), rtol=1e-5, atol=1e-6, equal_nan=True)
        except AssertionError as e:
            return f"{path}: values differ ({str(e).splitlines()[0] if str(e) else 'assert_close'})"
        return None
    if isinstance(expected, np.ndarray):
        if actual.dtype != expected.dtype or actual.shape != expected.shape:
            return f"{path}: ndarray {actual.dtype}{actual.shape} != {expected.dtype}{expected.shape}"
        return None if np.allclose(actual, expected, equal_nan=True) else f"{path}: ndarray values differ"
    if isinstance(expected, np.generic) and np.issubdtype(expected.dtype, np.inexact):
        # a numpy float scalar (a reduction's result): the same type, values as tensors compare
        return None if np.allclose(actual, expected, rtol=1e-5, atol=1e-6, equal_nan=True) else f"{path}: {actual!r} != {expected!r}"
    if isinstance(expected, float):
        if math.isnan(expected) and math.isnan(actual):
            return None
        return None if math.isclose(actual, expected, rel_tol=1e-6, abs_tol=1e-9) else f"{path}: {actual!r} != {expected!r}"
    if isinstance(expected, (list, tuple, collections.deque)):
        if len(actual) != len(expected):
            return f"{path}: len {len(actual)} != {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            d = diff(a, e, f"{path}[{i}]")
            if d:
                return d
        return None
    if isinstance(expected, dict):
        if list(actual.keys()) != list(expected.keys()):
            return f"{path}: keys {list(actual.keys())} != {list(expected.keys())}"
        for k in expected:
            d = diff(actual[k], expected[k], f"{path}[{k!r}]")
            if d:
                return d
        if hasattr(expected, "__dict__") and (vars(expected) or vars(actual)):  # e.g. ModelOutput's attributes
            return diff(vars(actual), vars(expected), f"{path}.__dict__")
        return None
    if isinstance(expected, (set, frozenset, str, bytes, int, bool, type(None), complex, torch.dtype,
                             torch.device, torch.Size)):
        return None if actual == expected else f"{path}: {actual!r} != {expected!r}"
    if dataclasses.is_dataclass(expected) or hasattr(expected, "__dict__"):
        if isinstance(expected, torch.nn.Module):
            return diff(dict(actual.state_dict()), dict(expected.state_dict()), f"{path}.state_dict()")
        if callable(expected) and not dataclasses.is_dataclass(expected):
            return None  # functions/closures: identity can't match across runs
        return diff(vars(actual), vars(expected), f"{path}.__dict__")
    try:
        return None if actual == expected else f"{path}: {actual!r} != {expected!r}"
    except Exception as e:  # noqa: BLE001
        return f"{path}: cannot compare ({type(e).__name__})"


@dataclasses.dataclass
class Outcome:
    result: object = None
    args: object = None
    printed: str = ""
    effects: dict = None
    exc: BaseException = None

    def describe_exc(self):
        return f"{type(self.exc).__name__}: {str(self.exc).splitlines()[0] if str(self.exc) else ''}"[:300]


def call(fn, args):
    """Run fn on args (already copies); capture the result, stdout, side effects and exceptions."""
    P.reset_side_effects()
    out = Outcome(args=args)
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            out.result = fn(*args)
    except Exception as e:  # noqa: BLE001
        out.exc = e
    out.printed = buf.getvalue()
    out.effects = P.side_effects()
    return out


def compare(actual, expected):
    """None when the compiled outcome matches eager's, else why not."""
    if expected.exc is not None:
        if actual.exc is None:
            return f"eager raised {expected.describe_exc()} but compiled did not"
        if type(actual.exc) is not type(expected.exc):
            return f"raised {actual.describe_exc()} where eager raised {expected.describe_exc()}"
        return None
    if actual.exc is not None:
        return "raised " + actual.describe_exc()
    for what, a, e in (("result", actual.result, expected.result), ("args", actual.args, expected.args),
                       ("stdout", actual.printed, expected.printed), ("effects", actual.effects, expected.effects)):
        d = diff(a, e, what)
        if d:
            return d
    return None


def make_inputs(prog):
    P.seed_inputs(prog.name)
    return [prog.make() for _ in range(CALLS)]


def build(prog):
    torch.manual_seed(0)  # modules built by the runner get the same (overwritten) init everywhere
    return prog.build()


def run_variant(prog, inputs, expected, compile_fn):
    """Compile a fresh build of the program; call it on copies of each input set; compare.

    Returns None, or (status, message) with status "error" (compiling raised, or a call raised
    where eager did not / raised another type) or "wrong" (a value or side effect differs)."""
    try:
        fn = compile_fn(build(prog))
    except Exception as e:  # noqa: BLE001
        return "error", f"compile raised {type(e).__name__}: {e}"[:300]
    for i, args in enumerate(inputs):
        got = call(fn, copy.deepcopy(args))
        d = compare(got, expected[i])
        if d:
            raised = got.exc is not None and (expected[i].exc is None or type(got.exc) is not type(expected[i].exc))
            return ("error" if raised else "wrong"), f"call {i + 1}: {d}"
    return None


def expected_outcomes(prog, inputs):
    fn = build(prog)
    return [call(fn, copy.deepcopy(args)) for args in inputs]


def check_kiln(prog, backend="eager", inputs=None):
    """(failure or None, kiln.stats()) for kiln.compile(program) against eager."""
    inputs = inputs if inputs is not None else make_inputs(prog)
    expected = expected_outcomes(prog, inputs)
    kiln.reset()
    failure = run_variant(prog, inputs, expected, lambda f: kiln.compile(f, backend=backend))
    return (failure[1] if failure else None), kiln.stats()


def run_program(prog, backend):
    inputs = make_inputs(prog)
    expected = expected_outcomes(prog, inputs)
    rec = {"name": prog.name, "group": prog.group,
           "eager_raises": [o.describe_exc() for o in expected if o.exc is not None]}

    kiln.reset()
    t = time.perf_counter()
    rec["kiln_failure"] = run_variant(prog, inputs, expected, lambda f: kiln.compile(f, backend=backend))
    rec["kiln_s"] = round(time.perf_counter() - t, 3)
    s = kiln.stats()
    rec["kiln_graphs"] = s["graphs"]
    # captures whose graph has at least one op (a resume function that only returns has none;
    # Dynamo compiles no graph for those, so this is the count comparable to its unique_graphs)
    rec["kiln_graphs_with_ops"] = sum(1 for g in s["graph_records"] if g.get("ops", 0) > 0)
    rec["kiln_breaks"] = s["graph_breaks"]
    rec["kiln_break_list"] = [{k: b.get(k) for k in ("function", "where", "reason")} for b in s["breaks"]]
    kiln.reset()

    torch._dynamo.reset()
    counters.clear()
    t = time.perf_counter()
    rec["torch_failure"] = run_variant(prog, inputs, expected, lambda f: torch.compile(f, backend="eager"))
    rec["torch_s"] = round(time.perf_counter() - t, 3)
    rec["torch_graphs"] = counters["stats"]["unique_graphs"]
    # Dynamo files some breaks (a data-dependent branch, since 2.13) only under "unimplemented".
    breaks = collections.Counter(counters["graph_break"])
    for reason, n in counters["unimplemented"].items():
        breaks[reason.split("\n")[0]] += n
    rec["torch_breaks"] = sum(breaks.values())
    rec["torch_break_reasons"] = dict(breaks)
    torch._dynamo.reset()
    counters.clear()
    for who in ("kiln", "torch"):
        f = rec[f"{who}_failure"]
        rec[f"{who}_status"], rec[f"{who}_failure"] = ("ok", None) if f is None else f
    return rec


# ---- report -------------------------------------------------------------------------------------
def short(reason, n=110):
    reason = re.sub(r" (object )?at 0x[0-9a-f]+", "", " ".join(str(reason).split()))
    return reason if len(reason) <= n else reason[: n - 3] + "..."


def summarize(records, out=sys.stdout):
    p = lambda *a: print(*a, file=out)  # noqa: E731
    groups = collections.OrderedDict()
    for r in records:
        groups.setdefault(r["group"], []).append(r)
    hdr = f"{'group':<16} {'progs':>5} {'k.graphs':>8} {'k.breaks':>8} {'t.graphs':>8} {'t.breaks':>8} " \
          f"{'k.wrong':>7} {'k.err':>5} {'t.wrong':>7} {'t.err':>5}"
    p(hdr)
    p("-" * len(hdr))

    def row(name, rs):
        c = lambda who, st: sum(r[f"{who}_status"] == st for r in rs)  # noqa: E731
        p(f"{name:<16} {len(rs):>5} {sum(r['kiln_graphs'] for r in rs):>8} {sum(r['kiln_breaks'] for r in rs):>8} "
          f"{sum(r['torch_graphs'] for r in rs):>8} {sum(r['torch_breaks'] for r in rs):>8} "
          f"{c('kiln', 'wrong'):>7} {c('kiln', 'error'):>5} {c('torch', 'wrong'):>7} {c('torch', 'error'):>5}")
    for g, rs in groups.items():
        row(g, rs)
    p("-" * len(hdr))
    row("TOTAL", records)

    p(f"kiln graphs with at least one op: {sum(r.get('kiln_graphs_with_ops', 0) for r in records)} "
      f"(k.graphs counts every capture, empty ones included); programs where they outnumber torch.compile's: "
      f"{sum(r.get('kiln_graphs_with_ops', 0) > r['torch_graphs'] for r in records)}")

    more = [r for r in records if r["kiln_breaks"] > r["torch_breaks"]]
    p(f"\nprograms where kiln breaks more than torch.compile: {len(more)}")
    for r in more:
        reasons = "; ".join(short(b["reason"], 90) for b in r["kiln_break_list"][:3])
        p(f"  {r['name']:<32} kiln {r['kiln_breaks']} vs torch {r['torch_breaks']}: {reasons}")
    fewer = [r for r in records if r["kiln_breaks"] < r["torch_breaks"]]
    p(f"\nprograms where kiln breaks less than torch.compile: {len(fewer)}")

    reasons = collections.Counter()
    for r in more:
        for b in r["kiln_break_list"]:
            reasons[short(b["reason"], 150)] += 1
    p("\ntop kiln break reasons (programs where torch.compile breaks less):")
    for reason, n in reasons.most_common(15):
        p(f"  {n:>3}  {reason}")

    for who in ("kiln", "torch"):
        bad = [r for r in records if r[f"{who}_failure"]]
        p(f"\n{who}: wrong or errored: {len(bad)}")
        for r in bad:
            p(f"  [{r[f'{who}_status']}] {r['name']}: {short(r[f'{who}_failure'], 300)}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", default="eager", choices=["eager", "kiln"])
    ap.add_argument("--json", help="write per-program records to this file")
    ap.add_argument("-k", default=None, help="only programs whose name or group contains this")
    args = ap.parse_args(argv)
    progs = [p for p in P.PROGRAMS if args.k is None or args.k in p.name or args.k in p.group]
    records = []
    t0 = time.perf_counter()
    for i, prog in enumerate(progs):
        try:
            records.append(run_program(prog, args.backend))
        except Exception:  # noqa: BLE001  (a bug in the runner itself: report and go on)
            print(f"runner failed on {prog.name}:\n{traceback.format_exc()}", file=sys.stderr)
        if os.environ.get("CORPUS_VERBOSE"):
            r = records[-1]
            print(f"[{i + 1}/{len(progs)}] {prog.name}: kiln {r['kiln_status']} {r['kiln_graphs']}g/"
                  f"{r['kiln_breaks']}b, torch {r['torch_status']} {r['torch_graphs']}g/{r['torch_breaks']}b",
                  file=sys.stderr)
    print(f"{len(records)} programs, backend={args.backend}, {time.perf_counter() - t0:.1f}s\n")
    summarize(records)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(records, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
