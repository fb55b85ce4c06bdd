"""Seeded generator of small Python+PyTorch programs (source text) for differential fuzzing.

    prog = generate(seed)          # deterministic: random.Random(seed)
    prog.source                    # a module: `def f(*args)` and `def make_inputs(rng_seed, variant)`

The generated module defines:
  * ``f(a0, a1, ...)``: 5-20 statements drawn from the op table ``OPS`` below.
  * ``make_inputs(rng_seed, variant)``: the argument list; ``variant`` 0 to 5 give different
    sizes for the symbolic dims (N0, N1, ...), ``rng_seed`` the values. Variants 0 and 1 are the
    first two shapes (1 and 0 among their sizes); 2, 3 and 4 (sizes >= 2, N0 unlike its earlier
    sizes) are the third, fourth and fifth shapes, which a graph compiled with symbolic sizes
    serves (kiln's runtime sizes are fitted once three sizes are seen: the fifth is served by
    that fitted kernel set); 5 is variant 2 with N0 at 1.
  * ``_SINK``: an io.StringIO that the program may print to (the runner compares its content).

Generation is "execute as you go": every candidate statement is run eagerly on the inputs of
all variants; a statement that raises is rejected, except that now and then one is kept as the
last statement on purpose (the compiled program must then raise the same exception). The op
generators therefore only need to be plausible; the executor tells which ones are valid, and
they read the live values (dtypes, shapes) of the variables to pick their operands.

To add an op: write ``def _op_name(g)`` returning a statement (str, may be multi-line) or
None when not applicable, and decorate it with ``@op(weight)``.
"""
from __future__ import annotations

import io
import math
import random
import textwrap
from dataclasses import dataclass, field

import torch

HEADER = '''\
import io
import math

import numpy as np
import torch

_SINK = io.StringIO()


def _rnd(g, shape, dtype):
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g, dtype=dtype)
    return torch.randint(-4, 5, shape, generator=g, dtype=dtype)
'''

DTYPES = {"f32": "torch.float32", "f64": "torch.float64", "i64": "torch.int64", "b": "torch.bool"}
SIZES = [1, 2, 3, 4, 5, 6, 7, 8, 11, 13]
NVARIANTS = 6  # make_inputs(rng_seed, variant) for variant in range(NVARIANTS): the worker's CALLS


@dataclass
class Program:
    seed: int
    source: str
    n_stmts: int = 0
    expects_error: bool = False
    features: list = field(default_factory=list)

    def save(self, path, header=""):
        with open(path, "w") as fh:
            if header:
                fh.write("".join("# " + line + "\n" for line in header.splitlines()))
            fh.write(self.source)


OPS: list = []  # (weight, fn, name)


def op(weight):
    def deco(fn):
        OPS.append((weight, fn, fn.__name__.removeprefix("_op_")))
        return fn
    return deco


class _Reject(Exception):
    pass


class Gen:
    def __init__(self, seed: int):
        self.seed = seed
        self.r = random.Random(seed)
        self.args: list[tuple[str, str]] = []  # (name, creation expression inside make_inputs)
        self.syms: list[tuple[str, tuple[int, ...]]] = []  # (name, its size in each variant)
        self.stmts: list[str] = []
        self.vars: list[str] = []  # locals of f, in creation order (args included)
        self.pending: list[str] = []
        self.alive = [True] * NVARIANTS  # variants that have not raised (variant 0 always runs)
        self.envs: list = [None] * NVARIANTS
        self.expects_error = False
        self.features: list[str] = []
        self.list_arg = None
        self.dict_arg = None
        self.keep_error_p = 0.2  # how often a raising statement is kept (as the last one)

    # ---------------------------------------------------------------- inputs
    def sym(self):
        r = self.r
        if self.syms and r.random() < 0.6:
            return r.choice(self.syms)[0]
        used = {v[:2] for _, v in self.syms}
        while True:
            v0 = r.choice(SIZES)
            v1 = 0 if r.random() < 0.08 else r.choice(SIZES)
            if v1 != v0 and (v0, v1) not in used:
                break
        # the third to fifth sizes from their own stream (the programs' random choices stay those
        # of the two-variant generator): >= 2, so that 0/1 specialisation is not what they test; N0
        # takes distinct sizes (every variant is a new shape), the other symbols may come back to
        # an earlier size (some dims change, others stay) and may coincide with each other
        # (duck-sized alike in one variant, apart in the next)
        vr = random.Random(f"kiln-fuzz-variants-{self.seed}-{len(self.syms)}")
        vals = [v0, v1]
        for _ in range(2, NVARIANTS - 1):
            vals.append(vr.choice([s for s in SIZES if s >= 2 and s != vals[-1] and (self.syms or s not in vals)]))
        # the last variant takes N0 to 1 (the other dims as in variant 2): a size the graphs
        # compiled with symbolic sizes (which assume >= 2) must not serve
        vals.append(vals[2] if self.syms else 1)
        name = f"N{len(self.syms)}"
        self.syms.append((name, tuple(vals)))
        return name

    def rand_dims(self, rank):
        r = self.r
        dims = []
        for _ in range(rank):
            x = r.random()
            if x < 0.55:
                dims.append(self.sym())
            elif x < 0.62:
                dims.append("1")
            elif x < 0.64:
                dims.append("0")
            else:
                dims.append(str(r.choice([2, 3, 4, 5, 6, 7])))
        return dims

    def tensor_expr(self, dims, dt, layout=None):
        r = self.r
        rank = len(dims)
        if layout is None:
            x = r.random()
            layout = ("contig" if x < 0.55 or rank == 0 else "transposed" if x < 0.72 and rank >= 2 else
                      "step" if x < 0.85 else "permuted" if rank >= 3 and x < 0.92 else
                      "expanded" if x < 0.96 else "contig")
        if layout == "transposed":
            i, j = sorted(r.sample(range(rank), 2))
            d = list(dims)
            d[i], d[j] = d[j], d[i]
            return f"_rnd(g, ({', '.join(d)},), {dt}).transpose({i}, {j})"
        if layout == "step":
            k = r.randrange(rank)
            d = list(dims)
            d[k] = f"2 * {d[k]}"
            idx = ", ".join([":"] * k + ["::2"])
            return f"_rnd(g, ({', '.join(d)},), {dt})[{idx}]"
        if layout == "permuted":
            perm = list(range(rank))
            r.shuffle(perm)
            inv = [perm.index(i) for i in range(rank)]
            d = [dims[p] for p in inv]  # base dims such that base.permute(perm) has `dims`
            d = [None] * rank
            for out_pos, src in enumerate(perm):
                d[src] = dims[out_pos]
            return f"_rnd(g, ({', '.join(d)},), {dt}).permute({', '.join(map(str, perm))})"
        if layout == "expanded":
            k = r.randrange(rank)
            d = list(dims)
            d[k] = "1"
            return f"_rnd(g, ({', '.join(d)},), {dt}).expand({', '.join(dims)})"
        return f"_rnd(g, ({', '.join(dims)}{',' if rank == 1 else ''}), {dt})"

    def rand_dtype(self):
        x = self.r.random()
        return "torch.float32" if x < 0.62 else "torch.float64" if x < 0.77 else "torch.int64" if x < 0.91 else "torch.bool"

    def add_arg(self, expr, prefix="a"):
        name = f"{prefix}{len(self.args)}"
        self.args.append((name, expr))
        self.vars.append(name)
        if hasattr(self, "env0"):  # added by an op generator: make its value visible now
            try:
                self.rebuild()
            except Exception:
                raise _Reject
        return name

    def init_args(self):
        r = self.r
        for _ in range(r.choice([1, 2, 2, 3])):
            rank = r.choices([0, 1, 2, 3], [8, 27, 40, 25])[0]
            self.add_arg(self.tensor_expr(self.rand_dims(rank), self.rand_dtype()))
        if r.random() < 0.25:
            dims = self.rand_dims(r.choice([1, 2]))
            n = r.choice([1, 2, 3])
            self.list_arg = self.add_arg("[" + ", ".join(self.tensor_expr(dims, "torch.float32", "contig")
                                                        for _ in range(n)) + "]", "l")
        if r.random() < 0.15:
            dims = self.rand_dims(r.choice([1, 2]))
            self.dict_arg = self.add_arg("{" + ", ".join(f"'{k}': " + self.tensor_expr(dims, "torch.float32", "contig")
                                                        for k in r.sample("xyz", r.choice([1, 2]))) + "}", "d")
        if r.random() < 0.12:
            self.add_arg(repr(r.choice([2, 3, -1, 0.5, 1.5])), "s")

    def add_alias_arg(self):
        """Now and then an argument that is a view of an earlier tensor argument (different tensors
        over one memory: a write through one must be seen through the other). Its own random
        stream, so the other programs of each seed do not change."""
        r = random.Random(f"kiln-fuzz-alias-{self.seed}")
        if r.random() >= 0.1:
            return
        env = self.fresh_env(0)
        cands = [n for n, _ in self.args if isinstance(env.get(n), torch.Tensor) and env[n].dim() >= 1]
        if not cands:
            return
        a = r.choice(cands)
        forms = ["{a}[:1]", "{a}[..., :1]", "{a}.unsqueeze(0)", "{a}[1:]"]  # views at any size, 0 too
        if env[a].dim() == 2:
            forms.append("{a}.t()")
        Gen.add_arg(self, r.choice(forms).format(a=a), "a")
        self.features.append("aliased_args")

    def make_inputs_src(self):
        lines = ["def make_inputs(rng_seed, variant):", "    g = torch.Generator().manual_seed(rng_seed)"]
        for name, vals in self.syms:
            lines.append(f"    {name} = ({', '.join(map(str, vals))})[variant]")
        for name, expr in self.args:
            lines.append(f"    {name} = {expr}")
        lines.append(f"    return [{', '.join(n for n, _ in self.args)}]")
        return "\n".join(lines) + "\n"

    # ---------------------------------------------------------------- execution
    def fresh_env(self, variant):
        ns = {"__name__": "fuzz_gen"}
        exec(HEADER + "\n" + self.make_inputs_src(), ns)
        vals = ns["make_inputs"](self.seed, variant)
        for (name, _), v in zip(self.args, vals):
            ns[name] = v
        return ns

    def rebuild(self):
        self.env0 = self.fresh_env(0)
        for s in self.stmts:
            exec(s, self.env0)
        self.envs = [self.env0] + [None] * (NVARIANTS - 1)
        for k in range(1, NVARIANTS):
            if self.alive[k]:
                try:
                    env = self.fresh_env(k)
                    for s in self.stmts:
                        exec(s, env)
                    self.envs[k] = env
                except Exception:
                    self.alive[k] = False

    @property
    def env1(self):
        """Variant 1's locals, None once it raised."""
        return self.envs[1]

    def try_stmt(self, stmt):
        """Run `stmt` on all variants; returns True if accepted (and f ends if it raises). A
        statement that raises on variant 0 ends f on purpose now and then; one that raises only on
        a later variant is rejected, or (1 in 4) kept: that variant's call must then raise alike."""
        try:
            exec(stmt, self.env0)
        except Exception:
            self.rebuild()
            if len(self.stmts) >= 2 and not self.expects_error and self.r.random() < self.keep_error_p:
                self.stmts.append(stmt)
                self.expects_error = True
                self.features.append("raises")
                return True
            return False
        for k in range(1, NVARIANTS):
            if self.envs[k] is None:
                continue
            try:
                exec(stmt, self.envs[k])
            except Exception:
                if self.r.random() < 0.75:
                    self.rebuild()
                    return False
                self.envs[k] = None
                self.alive[k] = False
        self.stmts.append(stmt)
        self.vars.extend(n for n in self.pending if n not in self.vars)
        return True

    # ---------------------------------------------------------------- helpers for op generators
    def new(self, prefix="t"):
        n = f"{prefix}{len(self.vars) + len(self.pending)}"
        self.pending.append(n)
        return n

    def val(self, name):
        return self.env0.get(name)

    def tensors(self, pred=None, args_only=False):
        out = []
        for n in self.vars:
            v = self.env0.get(n)
            if isinstance(v, torch.Tensor) and (pred is None or pred(v)) and (not args_only or n[0] == "a"):
                out.append(n)
        return out

    def pick(self, pred=None, **kw):
        c = self.tensors(pred, **kw)
        if not c:
            raise _Reject
        # favour recent variables
        w = [1.0 + i for i in range(len(c))]
        return self.r.choices(c, w)[0]

    def pick_float(self, **kw):
        return self.pick(lambda t: t.is_floating_point(), **kw)

    def as_float(self, name):
        t = self.val(name)
        return name if t.is_floating_point() else f"{name}.float()"

    def dim(self, name, allow_none=False):
        nd = self.val(name).dim()
        if allow_none and self.r.random() < 0.25:
            return None
        if nd == 0:
            return self.r.choice([0, -1])
        d = self.r.randrange(nd)
        return d - nd if self.r.random() < 0.4 else d

    def dim_expr(self, name, i):
        """Expression (symbol / constant) for dim i of variable `name` usable in make_inputs."""
        t0 = self.val(name)
        vals = []
        for env in self.envs:
            t = None if env is None else env.get(name)
            if not isinstance(t, torch.Tensor) or t.dim() != t0.dim():
                return None
            vals.append(t.shape[i])
        vals = tuple(vals)
        for s, v in self.syms:
            if v == vals:
                return s
        return str(vals[0]) if len(set(vals)) == 1 else None

    def arg_like(self, name, dt=None, drop_to_one=0.0, extra_last=None):
        """New argument whose shape matches `name`'s (for broadcasting / matmul operands)."""
        t = self.val(name)
        dims = []
        for i in range(t.dim()):
            e = self.dim_expr(name, i)
            if e is None:
                raise _Reject
            dims.append("1" if self.r.random() < drop_to_one else e)
        if extra_last is not None:
            dims.append(extra_last)
        return self.add_arg(self.tensor_expr(dims, dt or DTYPES["f32"]))

    def scalar(self):
        return self.r.choice(["2", "0.5", "-1.5", "3", "1e-3", "-2", "0.25"])


def _fmt_dim(d):
    return "" if d is None else str(d)


# ==================================================================== op table
UNARY_FLOAT = ["torch.sin({x})", "torch.cos({x})", "torch.exp({x}.clamp(-8, 8))", "torch.sqrt({x}.abs())",
               "torch.log1p({x}.abs())", "torch.tanh({x})", "torch.sigmoid({x})", "torch.relu({x})", "{x}.abs()",
               "-{x}", "torch.floor({x})", "{x}.ceil()", "{x}.round()", "torch.sign({x})", "torch.rsqrt({x}.abs() + 1)",
               "torch.nn.functional.gelu({x})", "torch.erf({x})", "{x}.reciprocal()", "torch.log({x})",
               "{x}.square()", "torch.nn.functional.silu({x})", "{x}.frac()", "torch.trunc({x})", "{x}.exp2()",
               "torch.nan_to_num({x})", "torch.isnan({x})", "torch.isfinite({x} / 0)", "{x}.neg().relu()"]
UNARY_INT = ["{x}.abs()", "-{x}", "{x} * 2", "{x} // 3", "{x} % 3", "torch.sign({x})", "{x}.clamp(-2, 2)",
             "{x} ** 2", "{x}.bitwise_not()", "{x} << 1", "{x} >> 1", "{x} & 3"]
UNARY_BOOL = ["~{x}", "{x}.logical_not()", "{x}.int()", "{x}.float() * 2", "{x} & {x}", "{x}.long() - 1"]


@op(10)
def _op_unary(g):
    x = g.pick()
    t = g.val(x)
    table = UNARY_FLOAT if t.is_floating_point() else UNARY_BOOL if t.dtype == torch.bool else UNARY_INT
    return f"{g.new()} = " + g.r.choice(table).format(x=x)


BINARY = ["{x} + {y}", "{x} - {y}", "{x} * {y}", "{x} / {y}", "torch.maximum({x}, {y})", "torch.minimum({x}, {y})",
          "torch.atan2({x}, {y})", "{x} ** 2 + {y}", "torch.pow({x}.abs(), {y})", "{x}.add({y}, alpha=2)",
          "torch.sub({x}, {y}, alpha=0.5)", "{x}.mul({y}).sub_(1)", "torch.hypot({x}, {y})", "{x} // {y}",
          "torch.fmod({x}, {y})", "torch.remainder({x}, {y})", "torch.lerp({x}, {y}, 0.25)", "torch.copysign({x}, {y})"]
BINARY_BOOL = ["{x} & {y}", "{x} | {y}", "{x} ^ {y}", "torch.logical_and({x}, {y})", "{x} == {y}"]


def _broadcastable(a, b):
    try:
        torch.broadcast_shapes(a.shape, b.shape)
        return True
    except RuntimeError:
        return False


@op(12)
def _op_binary(g):
    r = g.r
    x = g.pick()
    tx = g.val(x)
    if r.random() < 0.35 and tx.dim() > 0:  # a new argument of the same (partly broadcast) shape
        y = g.arg_like(x, dt=r.choice([DTYPES["f32"], DTYPES["f32"], str(tx.dtype)]), drop_to_one=0.3)
        if r.random() < 0.5:
            x, y = y, x
    else:
        cands = g.tensors(lambda t: _broadcastable(t, tx))
        y = r.choice(cands)
    tx, ty = g.val(x), g.val(y)
    if tx.dtype == torch.bool and ty.dtype == torch.bool:
        return f"{g.new()} = " + r.choice(BINARY_BOOL).format(x=x, y=y)
    if tx.dtype == torch.bool:
        x = f"{x}.float()"
    if ty.dtype == torch.bool:
        y = f"{y}.long()"
    return f"{g.new()} = " + r.choice(BINARY).format(x=x, y=y)


@op(6)
def _op_scalar(g):
    x = g.pick(lambda t: t.dtype != torch.bool)
    s = g.scalar()
    form = g.r.choice(["{x} * {s}", "{x} + {s}", "{s} - {x}", "{x} / {s}", "{s} * {x} + 1", "{x} ** 2 * {s}",
                       "torch.add({x}, {s})", "{x}.mul({s})", "{x}.div({s}, rounding_mode='floor')",
                       "{x} - {x}.mean(dtype=torch.float32) * {s}" if g.val(x).is_floating_point() else "{x} * {s}"])
    return f"{g.new()} = " + form.format(x=x, s=s)


@op(5)
def _op_compare(g):
    r = g.r
    x = g.pick(lambda t: t.dtype != torch.bool)
    tx = g.val(x)
    cands = g.tensors(lambda t: t.dtype != torch.bool and _broadcastable(t, tx))
    y = r.choice(cands)
    form = r.choice(["{x} > {y}", "{x} >= 0", "{x} < 0.5", "{x} == {y}", "{x}.ne({y})", "torch.eq({x}, 0)",
                     "{x} <= {y}", "torch.isclose({x}, {y})" if tx.dtype == g.val(y).dtype else "{x} != {y}"])
    return f"{g.new()} = " + form.format(x=x, y=y)


@op(5)
def _op_where(g):
    r = g.r
    x = g.pick(lambda t: t.dtype != torch.bool)
    tx = g.val(x)
    cands = g.tensors(lambda t: t.dtype != torch.bool and _broadcastable(t, tx))
    y = r.choice(cands)
    bools = g.tensors(lambda t: t.dtype == torch.bool and _broadcastable(t, tx))
    cond = r.choice(bools) if bools and r.random() < 0.5 else f"{x} > 0"
    form = r.choice(["torch.where({c}, {x}, {y})", "torch.where({c}, {x}, 0.0)", "{x}.where({c}, {y})",
                     "torch.where({c}, {y}, -1)", "{x}.masked_fill({c}, 7)"])
    return f"{g.new()} = " + form.format(c=cond, x=x, y=y)


@op(4)
def _op_clamp(g):
    x = g.pick(lambda t: t.dtype != torch.bool)
    form = g.r.choice(["{x}.clamp(min=-0.5, max=0.5)", "torch.clamp({x}, min=0)", "{x}.clamp(max=1)",
                       "{x}.clamp(-1, 1)", "torch.clamp({x}, {x}.mean(dtype=torch.float32), None)",
                       "{x}.clip(-2, 3)", "{x}.clamp_min(0.1)"])
    return f"{g.new()} = " + form.format(x=x)


@op(5)
def _op_cast(g):
    x = g.pick()
    form = g.r.choice(["{x}.to(torch.float64)", "{x}.float()", "{x}.long()", "{x}.bool()", "{x}.double()",
                       "{x}.int()", "{x}.to(torch.int64)", "{x}.type_as({y})", "{x}.to({y}.dtype)",
                       "{x}.half().float()", "{x}.to(dtype=torch.float32)"])
    return f"{g.new()} = " + form.format(x=x, y=g.pick())


REDUCE_ANY = ["sum", "amax", "amin", "prod", "argmax", "argmin"]
REDUCE_FLOAT = ["mean", "std", "var", "logsumexp", "nansum", "norm"]


@op(14)
def _op_reduce(g):
    r = g.r
    x = g.pick()
    tx = g.val(x)
    kind = r.choice(REDUCE_ANY + REDUCE_FLOAT + ["max", "min", "all", "any", "count_nonzero", "cumsum"])
    if kind in REDUCE_FLOAT or (tx.dtype == torch.bool and kind in ("amax", "amin", "prod")):
        x = g.as_float(x) if r.random() < 0.9 else x
    d = g.dim(x.split(".")[0], allow_none=kind not in ("logsumexp", "cumsum"))
    kd = r.random() < 0.4
    if kind in ("max", "min"):
        if d is None:
            return f"{g.new()} = {x}.{kind}()"
        return f"{g.new()} = {x}.{kind}({d}{', keepdim=True' if kd else ''}).{r.choice(['values', 'indices'])}"
    if kind == "cumsum":
        return f"{g.new()} = torch.cumsum({x}, {d})"
    if kind == "count_nonzero":
        return f"{g.new()} = torch.count_nonzero({x}{'' if d is None else f', {d}'})"
    if kind in ("std", "var") and r.random() < 0.3:
        extra = ", correction=0" if r.random() < 0.5 else ", unbiased=False"
    else:
        extra = ""
    if kind == "sum" and r.random() < 0.2:
        extra = ", dtype=torch.float64"
    if d is None:
        if kind in ("sum", "amax", "amin", "mean") and tx.dim() >= 2 and r.random() < 0.4:
            dims = tuple(sorted(r.sample(range(-tx.dim(), 0), 2)))
            return f"{g.new()} = {x}.{kind}({dims}{', keepdim=True' if kd else ''}{extra})"
        form = r.choice(["{x}.{k}({e})", "torch.{k}({x}{e})"])
        return f"{g.new()} = " + form.format(x=x, k=kind, e=extra.lstrip(", ") if "{x}." in form else extra)
    kdt = ", keepdim=True" if kd else ""
    return f"{g.new()} = {x}.{kind}({d}{kdt}{extra})"


@op(12)
def _op_view(g):
    r = g.r
    x = g.pick()
    t = g.val(x)
    nd = t.dim()
    forms = ["{x}.reshape(-1)", "{x}.flatten()", "{x}.unsqueeze({du})", "{x}.squeeze()", "{x}.contiguous()",
             "{x}.view(-1)", "{x}[None]", "{x}.expand(2, *{x}.shape)", "{x}.unsqueeze(-1).expand(*{x}.shape, 3)",
             "{x}.reshape(-1, 1)"]
    if nd >= 1:
        forms += ["{x}[1:]", "{x}[::2]", "{x}[-1]", "{x}[0]", "{x}.narrow({d}, 0, 1)", "{x}.squeeze({d})",
                  "{x}.select({d}, -1)", "{x}.chunk(2, {d})[0]", "{x}.split(2, {d})[-1]", "{x}.flip({d})",
                  "{x}[..., 1:]", "{x}.unbind({d})[0]", "{x}.movedim({d}, 0)", "{x}.roll(1, {d})", "{x}[:3]"]
    if nd >= 2:
        forms += ["{x}.transpose({d}, {d2})", "{x}.t()" if nd == 2 else "{x}.mT", "{x}.reshape({x}.shape[0], -1)",
                  "{x}.flatten(1)", "{x}[:, 1:3]", "{x}[:, ::2]", "{x}.view({x}.shape[0], -1)", "{x}.mT.contiguous()",
                  "{x}.permute({perm})", "{x}.unflatten(0, ({x}.shape[0], 1))", "{x}[1:, :-1]", "{x}.diagonal()",
                  "{x}.narrow(-1, 1, {x}.shape[-1] - 1)"]
    if nd >= 3:
        forms += ["{x}.flatten(0, 1)", "{x}[:, 0, :]", "{x}.view(-1, {x}.shape[-1])", "{x}.transpose(0, 2)[1]"]
    form = r.choice(forms)
    perm = list(range(nd))
    r.shuffle(perm)
    return f"{g.new()} = " + form.format(x=x, d=g.dim(x), d2=g.dim(x), du=r.randint(-nd - 1, nd),
                                         perm=", ".join(map(str, perm)))


@op(7)
def _op_matmul(g):
    r = g.r
    x = g.pick(lambda t: t.is_floating_point() and t.dim() >= 1)
    t = g.val(x)
    nd = t.dim()
    x_ = x
    if r.random() < 0.5:  # a weight argument
        k = r.choice(["1", "3", "4", "7", "0", g.sym()])
        e = g.dim_expr(x, nd - 1)
        if e is None:
            raise _Reject
        if nd >= 3 and r.random() < 0.5:
            b = g.dim_expr(x, 0)
            if b is None:
                raise _Reject
            w = g.add_arg(g.tensor_expr([b, e, k], str(t.dtype)))
            return f"{g.new()} = torch.bmm({x}, {w})" if nd == 3 else f"{g.new()} = {x} @ {w}"
        w = g.add_arg(g.tensor_expr([e, k], str(t.dtype)))
        form = r.choice(["{x} @ {w}", "torch.matmul({x}, {w})", "{x}.matmul({w})",
                         "torch.mm({x}, {w})" if nd == 2 else "{x} @ {w}",
                         "torch.nn.functional.linear({x}, {w}.t())"])
        return f"{g.new()} = " + form.format(x=x_, w=w)
    forms = ["{x} @ {x}.mT" if nd >= 2 else "{x} @ {x}", "{x}.mT @ {x}" if nd >= 2 else "torch.dot({x}, {x})",
             "{x} @ torch.ones({x}.shape[-1], 3, dtype={x}.dtype)",
             "{x} @ torch.ones({x}.shape[-1], 0, dtype={x}.dtype)",
             "torch.ones(0, {x}.shape[-2] if {x}.dim() > 1 else {x}.shape[0], dtype={x}.dtype) @ {x}"]
    if nd == 3:
        forms += ["torch.bmm({x}, {x}.transpose(1, 2))", "torch.bmm({x}[:, :0], {x}.transpose(1, 2))",
                  "torch.bmm({x}.transpose(1, 2)[:, :, :0], {x}[:, :0, :])",
                  "torch.einsum('bij,bkj->bik', {x}, {x})"]
    if nd == 2:
        forms += ["torch.mm({x}, {x}.t())", "torch.outer({x}[0], {x}[:, 0])", "torch.addmm({x}[0], {x}, {x}.t()[:, :1].expand({x}.shape[1], {x}.shape[1]))"]
    return f"{g.new()} = " + r.choice(forms).format(x=x)


@op(5)
def _op_cat(g):
    r = g.r
    x = g.pick(lambda t: t.dim() >= 1)
    t = g.val(x)
    d = g.dim(x)
    same = g.tensors(lambda u: u.shape == t.shape)
    y = r.choice(same)
    form = r.choice(["torch.cat([{x}, {y}], {d})", "torch.stack([{x}, {y}], {d})", "torch.cat(({x}, {x}[:1]), 0)",
                     "torch.cat([{x}, {x}[:0]])", "torch.stack([{x}, {y}, {x}])", "torch.cat([{x}] * 3, dim={d})",
                     "torch.hstack([{x}, {y}])", "torch.stack(({x},), -1)", "torch.cat([{y}.float(), {x}.double()], {d})"])
    return f"{g.new()} = " + form.format(x=x, y=y, d=d)


@op(5)
def _op_nn(g):
    r = g.r
    x = g.pick_float()
    d = g.dim(x)
    F = "torch.nn.functional"
    form = r.choice(["torch.softmax({x}, {d})", "{x}.log_softmax({d})", f"{F}.softmax({{x}}, dim={{d}})",
                     f"{F}.layer_norm({{x}}, {{x}}.shape[-1:])", f"{F}.normalize({{x}}, dim={{d}})",
                     "{x}.sort({d}).values", "torch.cumsum({x}, {d})", "torch.cumprod({x}, dim={d})",
                     f"{F}.leaky_relu({{x}}, 0.1)", f"{F}.hardtanh({{x}})", "{x}.softmax(-1) * {x}",
                     f"{F}.elu({{x}})", f"{F}.dropout({{x}}, p=0.0)", f"{F}.mse_loss({{x}}, {{x}} * 0.5)",
                     f"{F}.layer_norm({{x}}, {{x}}.shape[-1:], torch.ones({{x}}.shape[-1:], dtype={{x}}.dtype), None, 1e-3)",
                     "{x}.sort({d}, descending=True).indices", "torch.topk({x}, 1, {d}).values"])
    return f"{g.new()} = " + form.format(x=x, d=d)


@op(7)
def _op_inplace(g):
    r = g.r
    on_arg = r.random() < 0.45
    x = g.pick(lambda t: t.dtype != torch.bool, args_only=on_arg) if on_arg else g.pick(lambda t: t.dtype != torch.bool)
    t = g.val(x)
    fl = t.is_floating_point()
    ops = ["add_(1)", "mul_(2)", "clamp_(min=0)", "sub_({x}.mean(dtype=torch.float32))" if fl else "sub_(1)",
           "zero_()", "neg_()", "fill_(3)", "abs_()", "clamp_(-1, 1)", "mul_({x})", "div_(2)" if fl else "mul_(3)",
           "add_({x}, alpha=2)", "copy_({x} * 2)", "relu_()", "exp_()" if fl else "add_(2)",
           "addcmul_({x}, {x}, value=0.5)" if fl else "sub_(2)"]
    o = r.choice(ops).format(x=x)
    if on_arg:
        target = r.choice([x, x, f"{x}[0]" if t.dim() >= 1 else x, f"{x}[..., :1]" if t.dim() >= 1 else x])
        return f"{target}.{o}"
    # on a temporary (fresh clone or view of a temporary)
    n = g.new()
    if r.random() < 0.5:
        return f"{n} = {x}.clone()\n{n}.{o}"
    if r.random() < 0.5:
        return f"{n} = {x} * 1\n{n}.{o}\n{n} = {n} + 1"
    return f"{n} = {x} + 0\n{n}[{'0' if t.dim() else '...'}] = 5\n{n}.{o}"


@op(6)
def _op_control(g):
    r = g.r
    x = g.pick()
    t = g.val(x)
    n = g.new()
    nd = t.dim()
    k = r.choice([2, 3, 4])
    xf = g.as_float(x)
    forms = [f"if {x}.shape[0] > 3:\n    {n} = {xf} * 2\nelse:\n    {n} = {xf} - 1" if nd else
             f"if {x}.dim() == 0:\n    {n} = {xf} + 1\nelse:\n    {n} = {xf}",
             f"{n} = {xf}\nfor i in range({k}):\n    {n} = {n} * 0.5 + i",
             f"if {x}.numel() > 10:\n    {n} = {xf}.sum()\nelse:\n    {n} = {xf}.mean()",
             f"if {x}.dtype == torch.float32:\n    {n} = {x} + 1\nelif {x}.dtype == torch.bool:\n    {n} = ~{x}\nelse:\n    {n} = {x} * 3",
             f"{n} = {xf} * 0\ni = 0\nwhile i < {k}:\n    {n} = {n} + {xf} * i\n    i += 1",
             f"{n} = []\nfor i in range({x}.dim()):\n    {n}.append({xf}.sum(i) if {x}.shape[i] > 1 else {xf})"]
    if nd >= 1 and t.shape[0] <= 13:
        forms.append(f"{n} = {xf}[0] * 0\nfor row in {x}:\n    {n} = {n} + row")
        forms.append(f"{n} = {xf}.sum(0)\nfor i in range(1, {x}.shape[0]):\n    {n} = {n} - {xf}[i]")
        forms.append(f"{n} = {xf}\ni = 0\nwhile i < {x}.shape[-1] and i < 4:\n    {n} = {n} + {xf}[..., i:i + 1]\n    i += 1")
    return r.choice(forms)


@op(6)
def _op_containers(g):
    r = g.r
    x = g.pick(lambda t: t.dtype != torch.bool)
    xf = g.as_float(x)
    n = g.new()
    forms = [f"{n}_l = [{xf}, {xf}.sin(), {xf} * 3]\n{n} = sum({n}_l)",
             f"{n}_l = [{xf}, {xf} * 2]\n{n}_l.append({xf} - 1)\n{n} = sum({n}_l, start={xf})",
             f"{n}_l = [{xf} + i for i in range(3)]\n{n} = sum(({n}_u * {n}_u for {n}_u in {n}_l), start={xf})",
             f"{n}_l = [{xf}, {xf}.cos()]\n{n} = torch.stack({n}_l)",
             f"{n}_t = ({xf}, {xf}.abs())\n{n}_a, {n}_b = {n}_t\n{n} = {n}_a - {n}_b",
             f"{n}_d = {{'a': {xf}, 'b': {xf} * 2}}\n{n}_d['c'] = {n}_d['a'] + {n}_d['b']\n{n} = sum({n}_d.values())",
             f"{n}_d = {{'a': {xf}}}\n{n}_k = {n}_d.keys()\n{n}_d['b'] = {xf} * 2\n{n} = {xf} * len({n}_k)",
             f"{n}_d = {{'a': {xf}}}\n{n}_v = {n}_d.values()\n{n}_d['z'] = {xf} * 3\n{n} = sum({n}_v, start={xf})",
             f"{n}_d = {{'p': {xf}, 'q': {xf} + 1}}\n{n} = {xf} * 0\nfor {n}_k, {n}_v in {n}_d.items():\n    {n} = {n} + {n}_v * len({n}_k)",
             f"{n}_l = [{xf}.sum(), {xf}.amax() if {xf}.numel() else {xf}.sum()]\n{n} = max(len({n}_l), 2) * {n}_l[0]",
             f"{n}_l = list({xf}.unbind(0)) if {xf}.dim() else [{xf}]\n{n} = sum(u.sum() for u in {n}_l)",
             f"{n}_s = 2.0\ndef {n}_h(u):\n    return u * {n}_s + {xf}\n{n} = {n}_h({xf}.cos())",
             f"{n}_h = lambda u, k=2: u.relu() * k\n{n} = {n}_h({xf}) + {n}_h({xf}, 3)",
             f"def {n}_gen(u):\n    for i in range(3):\n        yield u * i\n{n} = sum({n}_gen({xf}))",
             f"{n}_l = [{xf}, {xf}]\n{n}_l[1] = {n}_l[1] + 1\n{n} = torch.stack([u * i for i, u in enumerate({n}_l)])",
             f"{n}_d = dict(a={xf})\n{n}_d.update(b={xf} * 2)\n{n} = {n}_d['b'] - {n}_d.pop('a')",
             f"{n} = {xf} * sum(1 for u in [{xf}, {xf}] if u.numel() > 0)"]
    if g.list_arg is not None and r.random() < 0.5:
        L = g.list_arg
        forms = [f"{L}.append({L}[0] * 2)\n{n} = sum({L})", f"{L}[0] = {L}[0] + 1\n{n} = {L}[-1] * 1",
                 f"{n} = {L}.pop()\n{L}.append({n} + {L}[0] if {L} else {n})", f"{L}[0].mul_(2)\n{n} = len({L}) * {L}[0]",
                 f"{n} = torch.stack({L}).sum(0)\n{L}.insert(0, {n})", f"{n} = sum({L}, start={L}[0])"]
    elif g.dict_arg is not None and r.random() < 0.5:
        D = g.dict_arg
        forms = [f"{D}['new'] = sum({D}.values())\n{n} = {D}['new'] * 1",
                 f"{n}_k = {D}.keys()\n{D}['w'] = next(iter({D}.values())) + 1\n{n} = len({n}_k) * {D}['w']",
                 f"{n} = sum({D}[k].sum() for k in sorted({D}))", f"{n} = {D}.pop(next(iter({D})))\n{D}['p'] = {n} * 2",
                 f"for {n}_k in list({D}):\n    {D}[{n}_k] = {D}[{n}_k] * 2\n{n} = list({D}.values())"]
    return r.choice(forms)


@op(3)
def _op_graph_break(g):
    r = g.r
    x = g.pick()
    xf = g.as_float(x)
    n = g.new()
    forms = [f"print({x}.shape, file=_SINK)\n{n} = {xf} + 1",
             f"print('sum', {xf}.sum(), file=_SINK)\n{n} = {xf} * 2",
             f"print({x}.dtype)\n{n} = {xf}.cos()",
             f"{n}_v = {xf}.sum().item()\n{n} = {xf} * {n}_v",
             f"{n}_v = {x}.tolist()\n{n} = {xf} + len({n}_v) if isinstance({n}_v, list) else {xf} - 1",
             f"if {xf}.sum() > 0:\n    {n} = {xf} + 1\nelse:\n    {n} = {xf} - 1",
             f"{n} = torch.nonzero({xf} > 0).float().sum(0)",
             f"{n} = {xf}[{xf} > 0]",
             f"if ({x} > 0).any():\n    {n} = {xf}.amax()\nelse:\n    {n} = {xf}.sum()",
             f"{n} = {xf} * int({x}.numel() > 3)",
             f"{n} = {xf}.sum().item() + 1.0"]
    return r.choice(forms)


# Off unless KILN_FUZZ_BREAK_PARITY=1: a zero weight leaves every seed's program as it was (the
# draws are the same), so the default seed ranges stay comparable across versions.
@op(2 if __import__("os").environ.get("KILN_FUZZ_BREAK_PARITY") == "1" else 0)
def _op_break_parity(g):
    """Constructs Dynamo captures without a break: numpy on tensors, assert and while on a tensor,
    torch.inference_mode, a generator fed by send(), vars() of an object made here."""
    r = g.r
    x = g.pick()
    xf = g.as_float(x)
    n = g.new()
    a = f"{xf}.detach().numpy()"
    forms = [f"{n} = torch.from_numpy({a} * 2 + 1)",
             f"{n}_a = {a}\n{n} = torch.as_tensor(np.tanh({n}_a) + {n}_a.mean(axis=-1, keepdims=True))",
             f"{n} = torch.from_numpy(np.where({a} > 0, {a}, 0.5) ** 2 - np.float64(1.5))",
             f"{n} = torch.as_tensor(({x}.detach().numpy() > 0).sum(axis=0) / 2)",
             f"{n} = {xf} * float({a}.sum())",
             f"assert torch.isfinite({xf}).all(), 'non-finite'\n{n} = {xf} + 1",
             f"assert ({xf} < 2).all(), f'too large: {{tuple({x}.shape)}}'\n{n} = {xf} * 2",
             f"{n} = {xf}\n{n}_i = 0\nwhile {n}.abs().sum() > 1 and {n}_i < 6:\n    {n} = {n} * 0.5\n    {n}_i += 1",
             f"with torch.inference_mode():\n    {n}_t = {xf} * 2 + 1\n{n} = {n}_t.clone()",
             f"with torch.inference_mode():\n    {n} = ({xf} * 2).sum()",
             f"def {n}_g():\n    s = 0\n    while True:\n        v = yield s\n        s = s + v\n{n}_it = {n}_g()\nnext({n}_it)\n"
             f"{n}_it.send({xf})\n{n} = {n}_it.send({xf} * 2)",
             f"class {n}_C:\n    pass\n{n}_o = {n}_C()\n{n}_o.a = {xf}\n{n}_d = vars({n}_o)\n{n}_o.b = 2\n{n} = {n}_d['a'] * len({n}_d)"]
    return r.choice(forms)


@op(1)
def _op_misc(g):
    r = g.r
    x = g.pick()
    xf = g.as_float(x)
    n = g.new()
    forms = [f"{n} = torch.zeros_like({xf}) + {xf}.sum()", f"{n} = torch.full_like({xf}, 2.5) * {xf}",
             f"{n} = torch.arange({x}.numel()).reshape({x}.shape) if {x}.dim() else torch.arange(3)",
             f"{n} = {xf}.new_ones(3) * {xf}.mean()", f"{n} = torch.tensor([1.0, 2.0]) * {xf}.sum()",
             f"{n} = {x}.shape[-1] * {xf} if {x}.dim() else {xf}", f"{n} = {xf}.size()",
             f"{n} = {x}.numel() + {x}.dim()", f"{n} = torch.empty_like({xf}).fill_(1.5)"]
    return r.choice(forms)


_LOCK = __import__("threading").Lock()  # redirect_stdout / catch_warnings are process-global


def fill(g, table, target, tolerate=()):
    """Draws statements from `table` ((weight, op, name) rows) into g until it has `target` of them
    (200 tries at most); an op that raises _Reject, or one of `tolerate`, adds nothing."""
    tries = 0
    weights = [w for w, _, _ in table]
    while len(g.stmts) < target and tries < 200 and not g.expects_error:
        tries += 1
        w, fn, name = g.r.choices(table, weights)[0]
        g.pending = []
        n_args = len(g.args)
        try:
            stmt = fn(g)
        except (_Reject, *tolerate):
            stmt = None
        if stmt is not None and g.try_stmt(stmt):
            g.features.append(name)
        elif len(g.args) != n_args:  # drop the argument the rejected op added
            dropped = {a for a, _ in g.args[n_args:]}
            del g.args[n_args:]
            g.vars = [v for v in g.vars if v not in dropped]
            g.rebuild()


def generate(seed: int) -> Program:
    import contextlib
    import warnings
    with _LOCK, contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():  # programs may print / warn
        warnings.simplefilter("ignore")
        return _generate(seed)


def _generate(seed: int) -> Program:
    from . import training  # a separate branch: the other seeds' programs do not change
    if training.is_training_seed(seed):
        return training.generate_training(seed)
    from . import floats  # likewise: float-argument / concatenation programs (KILN_FUZZ_FLOATS=0: off)
    if floats.is_float_seed(seed):
        return floats.generate_floats(seed)
    g = Gen(seed)
    r = g.r
    g.init_args()
    g.add_alias_arg()
    g.rebuild()
    target = r.randint(4, 14)
    fill(g, OPS, target)
    # return value: a few recent locals (tensors, python values, containers)
    cands = [v for v in g.vars if not v.startswith(("a", "l", "d", "s")) and v in g.env0]
    rets = cands[-r.choice([1, 2, 3]):] if cands else []
    if g.list_arg and r.random() < 0.3:
        rets.append(g.list_arg)
    if not rets:
        rets = [g.vars[0]]
    body = "\n".join(g.stmts) + ("\n" if g.stmts else "") + f"return ({', '.join(rets)},)"
    argnames = ", ".join(n for n, _ in g.args)
    src = (HEADER + "\n\n" + g.make_inputs_src() + "\n\n" + f"def f({argnames}):\n" + textwrap.indent(body, "    ") + "\n")
    src = f"# kiln fuzz program, seed {seed}\n" + src
    return Program(seed, src, len(g.stmts), g.expects_error, g.features)


def load(source: str, name="fuzz_prog"):
    ns = {"__name__": name}
    exec(compile(source, f"<{name}>", "exec"), ns)
    return ns


if __name__ == "__main__":
    import sys
    print(generate(int(sys.argv[1]) if len(sys.argv) > 1 else 0).source)
