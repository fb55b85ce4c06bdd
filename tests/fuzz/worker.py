"""Persistent fuzz worker: reads JSON requests (one per line) on stdin, runs each program eagerly
and compiled, answers one JSON line per program on a private copy of the original stdout
(fd 1 itself is pointed at /dev/null so that programs and C++ code may print freely).

    python -m tests.fuzz.worker --compiler kiln|torch-eager [--backend kiln|eager]

Request: {"seed": int, "source": str}.  Answer: {"seed", "outcome", "detail", "graphs", "breaks",
"eager_error"}.  The parent treats EOF (the worker died) as a crash of the program it last sent.
"""
from __future__ import annotations

import argparse
import io
import json
import math
import os
import sys
import traceback
import warnings

# (label, rng offset, variant): two shapes (kiln recompiles with symbolic sizes at the second), a
# third, fourth and fifth (served by that symbolic graph; a CPU inference graph fits its
# runtime-sizes kernel set once it has seen three sizes, and serves the fifth with it), then back
# to the first and second shapes (graphs and kernels already made take them again, new values),
# and last the third shape with N0 at 1 (the graphs with symbolic sizes assume sizes >= 2)
CALLS = [("first", 0, 0), ("repeat", 0, 0), ("fresh", 1, 0), ("variant", 2, 1), ("third", 9, 2), ("fourth", 10, 3),
         ("fifth", 13, 4), ("back", 11, 0), ("back-variant", 12, 1), ("ones", 14, 5)]
TOL = {"torch.float16": (1e-2, 1e-2), "torch.bfloat16": (2e-2, 2e-2), "torch.float32": (1e-4, 1e-4),
       "torch.float64": (1e-7, 1e-7)}
# Training-step programs (tests/fuzz/training.py) compare gradients and parameters after 2-3
# optimizer steps: float32 rtol 1e-3 and atol 1e-4 times the tensor's largest magnitude. A gradient
# is a sum over the batch and over every use of a value, and a compiled backward may sum in another
# order (fused reductions, a recomputed forward), so its rounding error grows with the summands'
# magnitude rather than the result's; momentum / Adam then carry that error into the next steps.
# Observed differences between correct runs are ~1e-6..1e-5 relative; a real bug (a wrong formula,
# a dropped or doubled contribution) is off by O(1).
TRAIN_TOL = {"torch.float16": (2e-2, 2e-2), "torch.bfloat16": (4e-2, 4e-2), "torch.float32": (1e-3, 1e-4),
             "torch.float64": (1e-6, 1e-6)}


def _low_precision_seen():
    """A TorchFunctionMode that notes whether any tensor op produced float32/16 values: then a
    float64 result may carry float32 rounding differences and is compared at float32 tolerance."""
    import torch
    from torch.overrides import TorchFunctionMode
    from torch.utils._pytree import tree_leaves
    low = (torch.float32, torch.float16, torch.bfloat16)

    class Seen(TorchFunctionMode):
        low_precision = False

        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if not self.low_precision:
                self.low_precision = any(isinstance(t, torch.Tensor) and t.dtype in low for t in tree_leaves(out))
            return out
    return Seen()


_NUM = None


def same_printed(a: str, b: str) -> bool:
    """Printed text equal up to float rounding (tensor reprs show ~4 significant digits)."""
    import re
    global _NUM
    _NUM = _NUM or re.compile(r"-?\d+\.\d*(?:e[+-]?\d+)?|-?\d+e[+-]?\d+")
    if a == b:
        return True
    # a printed tensor names its autograd node (grad_fn=<SumBackward0>): kiln's compiled node has
    # another name than eager's op for the same value
    a, b = re.sub(r"grad_fn=<\w+>", "grad_fn", a), re.sub(r"grad_fn=<\w+>", "grad_fn", b)
    if _NUM.sub("#", a) != _NUM.sub("#", b):
        return False
    return all(math.isclose(float(x), float(y), rel_tol=1e-3, abs_tol=1e-3)
               for x, y in zip(_NUM.findall(a), _NUM.findall(b)))


def compare(a, b, path="out", low_precision=False, training=False, grads=True):
    """None if eager value `a` and compiled value `b` agree, else a description of the first difference.
    Floats: NaN-aware, rtol/atol by dtype (float64 results of a program that computed in float32
    somewhere get float32 tolerance: `low_precision`); ints, bools: exact. Tensors: also
    requires_grad and `.grad`; modules: parameters (with grads) and buffers; optimizers: their state.
    `training` (training-step programs): TRAIN_TOL, atol scaled by the eager tensor's largest
    magnitude (gradients and optimizer steps accumulate rounding over sums and steps)."""
    import torch
    if type(a) is not type(b):
        return f"{path}: type {type(a).__name__} != {type(b).__name__}"
    if isinstance(a, torch.nn.Module):  # its parameters and buffers, compared as dicts
        return (compare(dict(a.named_parameters()), dict(b.named_parameters()), f"{path}.parameters", low_precision,
                        training, grads)
                or compare(dict(a.named_buffers()), dict(b.named_buffers()), f"{path}.buffers", low_precision, training, grads))
    if isinstance(a, torch.optim.Optimizer):
        return compare(a.state_dict()["state"], b.state_dict()["state"], f"{path}.state", low_precision, training)
    if isinstance(a, torch.Tensor):
        if a.requires_grad != b.requires_grad:
            return f"{path}: requires_grad {a.requires_grad} != {b.requires_grad}"
        if grads and (a.grad is not None or b.grad is not None):
            if a.grad is None or b.grad is None:
                return f"{path}.grad: {'None' if a.grad is None else 'a tensor'} != {'None' if b.grad is None else 'a tensor'}"
            d = compare(a.grad, b.grad, f"{path}.grad", low_precision, training)
            if d:
                return d
        if a.dtype != b.dtype:
            return f"{path}: dtype {a.dtype} != {b.dtype}"
        if a.shape != b.shape:
            return f"{path}: shape {tuple(a.shape)} != {tuple(b.shape)}"
        if a.device != b.device:
            return f"{path}: device {a.device} != {b.device}"
        if a.numel() == 0:
            return None
        if a.is_floating_point() or a.is_complex():
            key = "torch.float32" if low_precision and a.dtype == torch.float64 else str(a.dtype)
            x, y = a.detach().double(), b.detach().double()
            if training:
                rtol, atol = TRAIN_TOL.get(key, (1e-3, 1e-4))
                fin = x[x.isfinite()]
                atol *= max(1.0, float(fin.abs().max()) if fin.numel() else 1.0)
            else:
                rtol, atol = TOL.get(key, (1e-4, 1e-4))
            ok = torch.isclose(x, y, rtol=rtol, atol=atol, equal_nan=True)
            if training:
                # A NaN in eager's gradients or parameters is 0/0 or inf*0 (a variance of one
                # element, fmod(x, x)); a recomputed forward's rounding can make that zero a tiny
                # number and the NaN an inf. Any non-finite compiled value matches eager's NaN.
                ok |= x.isnan() & ~y.isfinite()
            if not bool(ok.all()):
                bad = (~ok).nonzero()[0].tolist()
                idx = tuple(bad)
                return (f"{path}: values differ at {len(bad) and idx} (eager {x[idx].item()!r} vs compiled "
                        f"{y[idx].item()!r}; {int((~ok).sum())}/{a.numel()} elements)")
            return None
        if not torch.equal(a, b):
            ne = (a != b).nonzero()[0].tolist()
            return f"{path}: values differ at {tuple(ne)} (eager {a[tuple(ne)].item()!r} vs compiled {b[tuple(ne)].item()!r})"
        return None
    if isinstance(a, float):
        if math.isnan(a) and math.isnan(b):
            return None
        if a == 0.0 and b == 0.0 and math.copysign(1.0, a) != math.copysign(1.0, b):
            return f"{path}: {a!r} != {b!r} (the sign of a zero)"  # Python floats: 1 / a, str(a), copysign tell
        if a == b or math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-4):
            return None
        return f"{path}: {a!r} != {b!r}"
    if isinstance(a, (list, tuple)):
        if len(a) != len(b):
            return f"{path}: length {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            d = compare(x, y, f"{path}[{i}]", low_precision, training, grads)
            if d:
                return d
        return None
    if isinstance(a, dict):
        if list(a) != list(b):
            return f"{path}: keys {list(a)} != {list(b)}"
        for k in a:
            d = compare(a[k], b[k], f"{path}[{k!r}]", low_precision, training, grads)
            if d:
                return d
        return None
    if isinstance(a, torch.Size) or isinstance(a, (int, bool, str, type(None))):
        return None if a == b else f"{path}: {a!r} != {b!r}"
    try:
        return None if a == b else f"{path}: {a!r} != {b!r}"
    except Exception:
        return None


FLOAT_TRANSFORMS = {"neg": lambda v: -v, "zero": lambda v: 0.0, "negzero": lambda v: -0.0, "negnz": lambda v: -v if v else v}


def _float_transform(v, how):
    """An argument for a float program's extra call (tests/fuzz/floats.py): Python floats changed by
    FLOAT_TRANSFORMS[how], anything else as made."""
    return FLOAT_TRANSFORMS[how](v) if type(v) is float else v


def _closer_to_float64(f, make_inputs, rs, variant, eo, co, ea, ca):
    """Whether the compiled result, where it differs from eager's, is at least as close as eager's
    to the same program run in float64 (its floating inputs upcast): then eager's own rounding is
    the difference (a 1 + erf(x) that cancels in float32 and a division after it, fuzz seed 15832),
    not a wrong compiled result. False when the float64 run raises or its results do not line up."""
    import torch
    from torch.utils._pytree import tree_leaves
    up = [t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in make_inputs(rs, variant)]
    torch.manual_seed(rs)
    try:
        with torch.no_grad():
            ro = f(*up)
    except Exception:  # noqa: BLE001
        return False
    for e, c, r in ((eo, co, ro), (ea, ca, up)):
        le, lc, lr = tree_leaves(e), tree_leaves(c), tree_leaves(r)
        if not len(le) == len(lc) == len(lr):
            return False
        for x, y, z in zip(le, lc, lr):
            if not isinstance(x, torch.Tensor) or not x.is_floating_point():
                continue
            if not isinstance(z, torch.Tensor) or z.shape != x.shape or not z.is_floating_point():
                return False
            x, y, z = x.detach().double(), y.detach().double(), z.detach().double()
            bad = ~torch.isclose(x, y, rtol=1e-4, atol=1e-4, equal_nan=True)
            if bad.any() and not bool(((y - z).abs() <= (x - z).abs())[bad].all()):
                return False
    return True


def _raised_in_backward(e):
    """Whether the exception came out of autograd's engine (a backward that stopped part-way)."""
    tb = e.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_name == "_engine_run_backward":
            return True
        tb = tb.tb_next
    return str(e).startswith(_INPLACE_SAVED)


_INPLACE_SAVED = "one of the variables needed for gradient computation has been modified by an inplace operation"


def _msg(e):
    """An exception's message for comparison. Autograd's error for a saved tensor written in place
    names the saved tensor ([torch.FloatTensor [1, 7]], output 0 of SomeBackward, its versions):
    a compiled backward saves other (equally valid) tensors than eager's formulas, so only the
    kind of error is compared there."""
    s = str(e)
    return _INPLACE_SAVED if s.startswith(_INPLACE_SAVED) else s


class Runner:
    def __init__(self, compiler: str, backend: str):
        import torch  # noqa: F401
        self.compiler = compiler
        self.backend = backend
        if compiler == "kiln":
            import kiln
            self.kiln = kiln
        else:
            import torch._dynamo  # noqa: F401

    def reset(self):
        if self.compiler == "kiln":
            self.kiln.reset()
        else:
            import torch._dynamo
            from torch._dynamo.utils import counters
            torch._dynamo.reset()
            counters.clear()

    def compile(self, fn):
        if self.compiler == "kiln":
            return self.kiln.compile(fn, backend=self.backend)
        import torch
        return torch.compile(fn, backend="eager")

    def counts(self):
        if self.compiler == "kiln":
            s = self.kiln.stats()
            return s.get("graphs", 0), s.get("graph_breaks", 0)
        from torch._dynamo.utils import counters
        return counters["stats"].get("unique_graphs", 0), sum(counters["graph_break"].values())

    def run_program(self, seed: int, source: str, path: str | None = None) -> dict:
        import torch
        self.reset()
        name = f"fuzz_prog_{seed}"
        fname = path or f"<{name}>"
        ns = {"__name__": name, "__file__": fname}
        exec(compile(source, fname, "exec"), ns)
        f, make_inputs, sink = ns["f"], ns["make_inputs"], ns["_SINK"]
        cf = self.compile(f)
        train = ns.get("train")  # a training-step program: its driver runs the steps (tests/fuzz/training.py)
        if train is not None:
            f_, cf_ = f, cf
            f = lambda *a: train(f_, list(a))  # noqa: E731
            cf = lambda *a: train(cf_, list(a))  # noqa: E731
        res = {"seed": seed, "outcome": "pass", "detail": "", "eager_error": False}

        def call(fn, args, mode=None):
            sink.seek(0)
            sink.truncate()
            try:
                if mode is not None:
                    with mode:
                        out = fn(*args)
                else:
                    out = fn(*args)
                return out, None, sink.getvalue()
            except Exception as e:  # noqa: BLE001
                return None, e, sink.getvalue()

        # float-argument programs (tests/fuzz/floats.py) call more often, with other float values
        calls = CALLS + [tuple(c) for c in ns.get("_EXTRA_CALLS", ())]
        for label, off, variant, *how in calls:
            rs = seed * 7919 + off
            ea, ca = make_inputs(rs, variant), make_inputs(rs, variant)
            if how:  # the float arguments negated, or set to 0.0 / -0.0 (FLOAT_TRANSFORMS)
                ea, ca = [_float_transform(v, how[0]) for v in ea], [_float_transform(v, how[0]) for v in ca]
            torch.manual_seed(rs)
            seen = _low_precision_seen()
            from torch.utils._pytree import tree_leaves
            seen.low_precision = any(isinstance(t, torch.Tensor) and t.dtype != torch.float64 and t.is_floating_point()
                                     for t in tree_leaves(ea))
            eo, ee, ep = call(f, ea, seen)
            if ee is not None:
                res["eager_raised"] = True
            lp = seen.low_precision
            tr = train is not None
            torch.manual_seed(rs)
            co, ce, cp = call(cf, ca)
            where = f"call '{label}' (make_inputs({rs}, {variant}))"
            if ee is not None or ce is not None:
                if ee is None or ce is None or type(ee) is not type(ce) or _msg(ee) != _msg(ce):
                    def desc(e):
                        return "no exception" if e is None else f"{type(e).__name__}: {str(e)[:600]}"
                    res.update(outcome="exception_mismatch",
                               detail=f"{where}: eager {desc(ee)} | compiled {desc(ce)}"
                               + ("" if ce is None else "\ncompiled traceback:\n" + "".join(
                                   traceback.format_exception(type(ce), ce, ce.__traceback__))[-3000:]))
                    break
                res["eager_error"] = True
                # a backward that raised part-way (a saved tensor written in place, an operator
                # without a derivative) has accumulated the gradients of the nodes the engine ran
                # before, in its own order: eager's many nodes vs kiln's few
                d = compare(ea, ca, "args", lp, tr, grads=not _raised_in_backward(ee))
            else:
                d = compare(eo, co, "out", lp, tr) or compare(ea, ca, "args", lp, tr)
            if d and not tr and ee is None and "values differ" in d and _closer_to_float64(f, make_inputs, rs, variant, eo, co, ea, ca):
                res["float64_arbiter"] = f"{where}: {d}"
                d = None
            if d is None and not same_printed(ep, cp):
                d = f"printed output differs: eager {ep[:300]!r} vs compiled {cp[:300]!r}"
            if d:
                res.update(outcome="wrong", detail=f"{where}: {d}")
                break
        res["graphs"], res["breaks"] = self.counts()
        return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--compiler", default="kiln", choices=["kiln", "torch-eager"])
    ap.add_argument("--backend", default="kiln")
    a = ap.parse_args()
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    sys.stdout = open(os.devnull, "w")
    warnings.filterwarnings("ignore")
    runner = Runner(a.compiler, a.backend)
    c = sys.modules.get("kiln._C")
    proto.write(json.dumps({"ready": True, "kiln_C": getattr(c, "__file__", None)}) + "\n")
    for line in sys.stdin:
        req = json.loads(line)
        try:
            res = runner.run_program(req["seed"], req["source"], req.get("path"))
        except Exception as e:  # noqa: BLE001  (a bug of the harness or of compile() itself)
            res = {"seed": req["seed"], "outcome": "harness_error", "eager_error": False, "graphs": 0, "breaks": 0,
                   "detail": "".join(traceback.format_exception(type(e), e, e.__traceback__))[-3000:]}
        print(f"[worker] seed {req['seed']}: {res['outcome']}", file=sys.stderr, flush=True)
        proto.write(json.dumps(res) + "\n")


if __name__ == "__main__":
    # The checkout, for `import kiln` when run from elsewhere: after the path's own entries, so a
    # sanitized kiln that PYTHONPATH puts first (scripts/sanitize.sh) is the one tested.
    sys.path.append(os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
    main()
