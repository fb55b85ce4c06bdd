"""Shrink a failing fuzz program to the statements that matter (delta debugging).

    python -m tests.fuzz.minimize /tmp/kiln_fuzz/kiln-kiln/seed55_exception_mismatch.py
    python -m tests.fuzz.minimize --seed 55 [--compiler kiln|torch-eager] [--backend kiln|eager]

The failure class of the original (outcome, plus the signal for a crash) must be kept by every
reduction. Reductions, each trial run in a worker process (a crash kills only the worker):
  1. ddmin over the top-level statements of f's body (the return statement stays),
  2. ddmin over the statements inside compound statements (if/for/while/def bodies),
  3. ddmin over the elements of the returned tuple,
  4. dropping arguments of f that the body no longer uses (and their make_inputs lines).
Prints the minimised source (and writes it to --output if given).
"""
from __future__ import annotations

import argparse
import ast
import os
import re
import sys

from .generator import generate
from .runner import FAILURES, Worker


class Oracle:
    def __init__(self, compiler, backend, timeout, seed=0):
        self.compiler, self.backend, self.timeout, self.seed = compiler, backend, timeout, seed
        self.worker = None
        self.trials = 0

    def run(self, source):
        self.trials += 1
        if self.worker is None or not self.worker.alive:
            self.worker = Worker(self.compiler, self.backend)
        res = self.worker.run(self.seed, source, self.timeout)
        if res["outcome"] in ("crash", "timeout"):
            self.worker = None
        return res

    def close(self):
        if self.worker is not None:
            self.worker.close()


def failure_class(res):
    if res["outcome"] not in FAILURES:
        return None
    return (res["outcome"], res.get("signal"))


def _find_f(tree):
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "f":
            return node
    raise ValueError("no def f(...) in the program")


def ddmin(items, test):
    """Classic ddmin: a 1-minimal sublist of `items` for which test(sublist) holds."""
    n = 2
    while len(items) >= 2:
        chunk = max(1, len(items) // n)
        subsets = [items[i:i + chunk] for i in range(0, len(items), chunk)]
        reduced = False
        for i in range(len(subsets)):
            complement = [x for j, s in enumerate(subsets) if j != i for x in s]
            if complement != items and test(complement):
                items, n, reduced = complement, max(n - 1, 2), True
                break
        if not reduced:
            if n >= len(items):
                break
            n = min(len(items), n * 2)
    if len(items) == 1 and test([]):
        return []
    return items


class Minimizer:
    def __init__(self, source, oracle, verbose=True):
        self.oracle = oracle
        self.verbose = verbose
        self.tree = ast.parse(source)
        if self.tree.body and isinstance(self.tree.body[0], ast.Expr) and isinstance(
                getattr(self.tree.body[0], "value", None), ast.Constant):  # the runner's failure docstring
            self.tree.body.pop(0)
        res = oracle.run(source)
        self.target = failure_class(res)
        self.first = res
        if self.target is None:
            raise SystemExit(f"the program does not fail (outcome {res['outcome']}); nothing to minimise")

    def src(self, tree=None):
        return ast.unparse(ast.fix_missing_locations(tree or self.tree)) + "\n"

    def holds(self, tree):
        try:
            s = self.src(tree)
            compile(s, "<candidate>", "exec")
        except (SyntaxError, ValueError):
            return False
        res = self.oracle.run(s)
        # a candidate must not start raising eagerly when the original did not (a removed
        # definition gives NameError in both runs, which is a different program, not a reduction)
        ok = failure_class(res) == self.target and (res.get("eager_error") or not res.get("eager_raised")) \
            and (self.first.get("eager_raised") or not res.get("eager_raised"))
        if ok:
            self.last = res
        return ok

    def _reduce_body(self, get_body, set_body, keep_last=False):
        body = get_body()
        fixed = body[-1:] if keep_last else []
        items = body[:-1] if keep_last else body

        def test(sub):
            old = get_body()
            set_body(list(sub) + fixed if (sub or fixed) else [ast.Pass()])
            ok = self.holds(self.tree)
            set_body(old)
            return ok

        best = ddmin(list(items), test)
        set_body(list(best) + fixed if (best or fixed) else [ast.Pass()])

    def run(self):
        for _ in range(4):  # the reductions enable each other (a smaller return frees statements)
            before = self.src()
            self._round()
            if self.src() == before:
                break
        return self.src()

    def _round(self):
        f = _find_f(self.tree)
        # 1. top-level statements of f
        self._reduce_body(lambda: f.body, lambda b: setattr(f, "body", b), keep_last=True)
        # 2. bodies of compound statements (one level deep, then again for nested ones)
        for _ in range(2):
            for node in list(ast.walk(f)):
                for attr in ("body", "orelse"):
                    if node is f or not isinstance(getattr(node, attr, None), list) or not getattr(node, attr):
                        continue
                    if attr == "orelse" and not isinstance(node, (ast.If, ast.For, ast.While)):
                        continue
                    self._reduce_body(lambda n=node, a=attr: getattr(n, a), lambda b, n=node, a=attr: setattr(n, a, b))
        # 3. the returned tuple
        ret = f.body[-1]
        if isinstance(ret, ast.Return) and isinstance(ret.value, ast.Tuple) and len(ret.value.elts) > 1:
            def test(sub):
                old = ret.value.elts
                ret.value.elts = list(sub)
                ok = bool(sub) and self.holds(self.tree)
                ret.value.elts = old
                return ok
            ret.value.elts = ddmin(list(ret.value.elts), test)
        # 4. unused arguments
        self._drop_unused_args(f)

    def _drop_unused_args(self, f):
        mk = next(n for n in self.tree.body if isinstance(n, ast.FunctionDef) and n.name == "make_inputs")
        used = {n.id for stmt in f.body for n in ast.walk(stmt) if isinstance(n, ast.Name)}
        for i in reversed(range(len(f.args.args))):
            name = f.args.args[i].arg
            if name in used:
                continue
            old_args, old_mk = list(f.args.args), list(mk.body)
            f.args.args.pop(i)
            ret = mk.body[-1]
            ret.value.elts = [e for e in ret.value.elts if not (isinstance(e, ast.Name) and e.id == name)]
            # the argument's creation line is kept when later arguments draw from the same generator
            # (dropping it would change their values), unless the program still fails without it
            trial = [s for s in mk.body if not (isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Name)
                                                and s.targets[0].id == name)]
            mk.body = trial
            if not self.holds(self.tree):
                mk.body = old_mk[:-1] + [mk.body[-1]]
                if not self.holds(self.tree):
                    f.args.args, mk.body = old_args, old_mk
                    mk.body[-1].value.elts = [ast.Name(a.arg, ast.Load()) for a in old_args]


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m tests.fuzz.minimize", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file", nargs="?", help="a saved failing program")
    ap.add_argument("--seed", type=int, help="regenerate the program of this seed instead")
    ap.add_argument("--compiler", default="kiln", choices=["kiln", "torch-eager"])
    ap.add_argument("--backend", default="kiln")
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--output", "-o")
    a = ap.parse_args(argv)
    if a.file:
        with open(a.file) as fh:
            source = fh.read()
        if a.seed is None:  # the runner derives input values from the seed: take it from the file
            mt = re.search(r"# kiln fuzz program, seed (\d+)", source)
            a.seed = int(mt.group(1)) if mt else 0
    elif a.seed is not None:
        source = generate(a.seed).source
    else:
        ap.error("give a file or --seed")
    oracle = Oracle(a.compiler, a.backend, a.timeout, a.seed)
    try:
        m = Minimizer(source, oracle)
        out = m.run()
        res = oracle.run(out)
    finally:
        oracle.close()
    detail = res.get("detail", "").split("\ncompiled traceback")[0].split("\n--- worker stderr")[0]
    print(f"# minimised ({oracle.trials} trials): {res['outcome']} {res.get('signal') or ''}".rstrip())
    print(f"# runner seed {a.seed}: inputs make_inputs({a.seed * 7919} + k, variant)")
    print("".join(f"# {line}\n" for line in detail.splitlines()), end="")
    print(out, end="")
    if a.output:
        with open(a.output, "w") as fh:
            fh.write(out)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
    sys.exit(main())
