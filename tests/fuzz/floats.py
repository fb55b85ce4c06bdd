"""Float-argument and concatenation programs for the fuzzer (a separate branch of ``generator.generate``).

A float program is an ordinary fuzz program (``f``, ``make_inputs``, ``_SINK``) whose arguments
include Python floats (``s*``) that change from call to call: ``make_inputs`` draws them with
``_flt(rng_seed, i)`` (ordinary values, values with one decimal, and special ones: 0.0, -0.0,
negatives, whole numbers as floats, an int now and then, tiny / huge / inf / nan), and the module
sets ``_EXTRA_CALLS`` so that the runner makes more calls than the usual four (first, repeat,
fresh, variant): a float seen with its second distinct value becomes a graph input (kiln's dynamic
floats), and the later calls run that graph with other values, 0.0 and negatives included, where
Python raises (ZeroDivisionError, ValueError, OverflowError) and a tensor would compute on.

The body draws from the ordinary op table plus:
  * Python arithmetic on the floats (+ - * / // % **, neg, abs, math.sqrt / log, float(), int(),
    round, min / max, with size expressions of tensors), giving more float locals (``u*``),
  * the floats as scalar operands of tensor ops (x * t, t / x, torch.where, masked_fill, clamp,
    lerp, full_like, torch.tensor(t), on int / bool / 0-d / float16 / bfloat16 tensors too),
  * branches and loops on them, closures and containers holding them, graph breaks with them live,
    in-place tensor ops taking them,
  * torch.cat / concat / concatenate in many forms: mixed dtypes, legacy empty 1-d tensors and
    empty slices, channels_last and transposed / strided inputs, negative dims, split/unbind
    round trips, out=, and invalid calls (bad dim, rank or size mismatch, 0-d input, an empty
    list) whose errors must surface exactly as in eager.
Returned values include floats (compared by type and value) and, for concatenations, the result's
strides / memory format.

Which seeds are float programs is decided by a separate ``random.Random`` (training seeds keep
their branch); ``KILN_FUZZ_FLOATS=0`` turns the branch off, giving back the previous programs.
"""
from __future__ import annotations

import os
import random
import textwrap

import torch

from .generator import HEADER, OPS, Gen, Program, _Reject, fill

FLOAT_FRACTION = 0.35

FLOAT_HEADER = '''
import random as _random

_SPECIAL = [0.0, {negzero}1.0, -1.0, 2.0, 3.0, -2.0, 0.5, -0.5, 0.1, 0.3, 1e-3, 100.0, -7.0, 1e-300]
_RARE = [{huge}float("inf"), float("-inf"), float("nan")]{ints}


def _flt(rng_seed, i, positive=False):
    """Float argument i of the call made with `rng_seed`: ordinary values mostly, special ones
    (0.0, -0.0, whole numbers as floats, tiny) a fifth of the time, huge / inf / nan rarely."""
    r = _random.Random(rng_seed * 1009 + i)
    x = r.random()
    if x < 0.03:
        v = r.choice(_RARE)
    elif x < 0.23:
        v = r.choice(_SPECIAL)
    elif x < 0.5:
        v = round(r.uniform(-3, 3), 1)
    else:
        v = r.uniform(-3, 3)
    if positive and v == v:
        v = abs(v)
    return v
'''
# Python ints among the values (a float argument called with an int: its guards must tell); off
# with KILN_FUZZ_FLOAT_INTS=0.
_INTS = "" if os.environ.get("KILN_FUZZ_FLOAT_INTS") == "0" else "\n_SPECIAL += [2, 0, -3]"
# KILN_FUZZ_FLOAT_KNOWN=1 adds what triggers the failures fuzz session 18 reported and that are not
# fixed: +-1e200 (eager's "value cannot be converted to type float without overflow" for a Scalar
# operand, where kiln's float64 graph values give inf; Python's OverflowError for `t ** 2` is fixed) and
# bfloat16 operands of pointwise ops with a Python scalar (generated CPU code and a dynamic float's
# cast do not round the scalar as eager does: 1 ulp). Fixed since, and on: -0.0 (guards compared
# with ==), a negative float base of `t ** tensor` (fx printed `-2.0 ** x`), ints (SystemError).
_KNOWN = os.environ.get("KILN_FUZZ_FLOAT_KNOWN") == "1"
_HUGE = "1e200, -1e200, " if _KNOWN else ""
_BF16 = "torch.bfloat16" if _KNOWN else "torch.float16"
# calls with the floats negated / zeroed (EXTRA_CALLS_TRANSFORMED): on unless KILN_FUZZ_FLOAT_TRANSFORMS=0
_TRANSFORMS = os.environ.get("KILN_FUZZ_FLOAT_TRANSFORMS", "1") != "0"

EXTRA_CALLS = [("float3", 3, 0), ("float4", 4, 0), ("float5", 5, 1), ("float6", 6, 0), ("float7", 7, 1),
               ("float7-again", 7, 1), ("float8", 8, 0)]
# the worker's FLOAT_TRANSFORMS: the float arguments negated, 0.0, then -0.0 (a guard must tell the zeros apart)
EXTRA_CALLS_TRANSFORMED = [("float8-negated", 8, 0, "neg"), ("zero", 8, 0, "zero"), ("negative-zero", 8, 0, "negzero"),
                           ("zero-again", 8, 0, "zero")]


def is_float_seed(seed: int) -> bool:
    if os.environ.get("KILN_FUZZ_FLOATS", "1") == "0":
        return False
    return random.Random(f"kiln-fuzz-float-{seed}").random() < FLOAT_FRACTION


FLOAT_OPS: list = []


def float_op(weight):
    def deco(fn):
        FLOAT_OPS.append((weight, fn, fn.__name__.removeprefix("_fop_")))
        return fn
    return deco


def _is_num(v):
    return isinstance(v, (float, int)) and not isinstance(v, bool)


class FloatGen(Gen):
    def __init__(self, seed):
        super().__init__(seed)
        self.r = random.Random(f"kiln-fuzz-float-program-{seed}")
        self.float_args: list[str] = []
        self.error_form = False  # the op just drawn raises on purpose (keep it more often)

    def init_args(self):
        r = self.r
        Gen.init_args(self)
        for i in range(r.choice([1, 1, 2, 2, 3])):
            pos = r.random() < 0.3
            self.float_args.append(Gen.add_arg(self, f"_flt(rng_seed, {i}{', positive=True' if pos else ''})", "s"))

    def fresh_env(self, variant):
        ns = {"__name__": "fuzz_gen"}
        exec(HEADER + FLOAT_HEADER.format(ints=_INTS, huge=_HUGE, negzero="-0.0, ") + "\n" + self.make_inputs_src(), ns)
        vals = ns["make_inputs"](self.seed, variant)
        for (name, _), v in zip(self.args, vals):
            ns[name] = v
        return ns

    def try_stmt(self, stmt):
        self.keep_error_p = 0.6 if self.error_form else 0.2
        self.error_form = False
        return super().try_stmt(stmt)

    # ------------------------------------------------------------- helpers
    def floats(self):
        return [n for n in self.vars if n[0] in "su" and _is_num(self.env0.get(n))]

    def fpick(self):
        c = self.floats()
        if not c:
            raise _Reject
        w = [3.0 if n in self.float_args else 1.0 + 0.2 * i for i, n in enumerate(c)]
        return self.r.choices(c, w)[0]

    def fother(self):
        """A second operand: another float, or a constant."""
        if self.r.random() < 0.5 and self.floats():
            return self.fpick()
        return self.r.choice(["0.5", "2.0", "3", "-1.5", "0.1", "1", "2"])

    def any_tensor(self):
        return self.pick()

    def new_dim_expr(self):
        x = self.r.random()
        return self.sym() if x < 0.5 else "0" if x < 0.58 else str(self.r.choice([1, 2, 3, 5]))


# ==================================================================== float ops
@float_op(9)
def _fop_arith(g):
    r = g.r
    a = g.fpick()
    b = g.fother()
    forms = ["{a} * 2.0", "1.0 - {a}", "{a} + {b}", "{a} - {b}", "{a} * {b}", "{a} / {b}", "{a} / 3", "2.0 / {a}",
             "{a} // 0.5", "{a} // {b}", "{a} % 1.5", "{a} % {b}", "{a} ** 2", "{a} ** 3", "{a} ** 0", "-{a}",
             "+{a}", "abs({a})", "math.sqrt({a})", "math.log({a})", "float({a})", "{a} ** -1", "{a} ** 0.5",
             "2 ** {a}", "{a} ** {b}", "math.exp({a})", "math.sqrt(abs({a}))", "math.floor({a})", "int({a})",
             "round({a}, 2)", "min({a}, 1.0)", "max({a}, {b})", "{a} * 0.1 + {b} * 0.2", "(1 - {a}) * (1 + {a})",
             "-{a} / 2", "abs({a}) ** 2 + 1", "{a} ** 64", "{a} ** 65", "math.sqrt({a}) * 2", "math.log({a}) - {b}",
             "float({a}) ** 2", "-(-{a})", "{a} - {a}", "{a} / {a}", "1 / ({a} - {a})", "{a} % -2.0", "-7 // {a}",
             "math.copysign(1.0, {a})", "math.copysign(2.0, {a} % 1.5)", "math.atan2({a}, -1.0)", "math.atan2({a} % 1.0, -1.0)",
             "math.copysign(1.0, -{a} * 0.0)", "math.copysign(1.0, {a} // 2.0)", "{a} % 1.0", "-{a} % 1.0"]
    x = None
    if r.random() < 0.3:
        try:
            x = g.pick(lambda t: t.dim() >= 1)
        except _Reject:
            x = None
    if x is not None:
        forms = ["{a} * {x}.shape[0]", "{a} / {x}.shape[0]", "{a} / ({x}.shape[0] - 4)", "{x}.shape[-1] / {a}",
                 "{a} * len({x})", "{a} // {x}.shape[0]", "{a} % {x}.shape[-1]", "{x}.shape[0] * {a} - {x}.numel()",
                 "{a} / ({x}.shape[0] - {x}.shape[0])", "{a} + {x}.dim()"]
    return f"{g.new('u')} = " + r.choice(forms).format(a=a, b=b, x=x)


@float_op(11)
def _fop_tensor(g):
    r = g.r
    a = g.fpick()
    x = g.any_tensor()
    t = g.val(x)
    b = g.fother()
    bools = g.tensors(lambda u: u.dtype == torch.bool and u.shape == t.shape)
    c = r.choice(bools) if bools and r.random() < 0.5 else f"{x} > 0"
    same = g.tensors(lambda u: u.shape == t.shape and u.is_floating_point())
    y = r.choice(same) if same else f"{g.as_float(x)}.cos()"
    xs = r.choice([x, x, x, f"{x}.half()", f"{x}.to({_BF16})", f"{x}.double().nan_to_num().clamp(-100, 100).long()",
                   f"{x}.double().nan_to_num().clamp(-100, 100).int()", f"{x}.bool()",
                   f"{g.as_float(x)}.sum()", f"{x}.double()", f"{x}[0]" if t.dim() else x,
                   f"{g.as_float(x)}.mean()" if t.numel() else x])
    forms = ["{x} * {a}", "{a} * {x}", "{x} / {a}", "{a} / {x}", "{x} + {a}", "{a} - {x}", "{x} - {a} * {b}",
             "torch.where({c}, {x}, {a})", "torch.where({c}, {a}, {x})", "torch.where({c}, {a}, {b})",
             "{x}.masked_fill({c}, {a})", "torch.clamp({x}, min={a})", "{x}.clamp({a}, {a} + 1)",
             "torch.add({x}, {a})", "{x}.mul({a})", "torch.add({x}, {y}, alpha={a})", "torch.lerp({y}, {y} * 2, {a})",
             "torch.full_like({x}, {a})", "torch.full(({n},), {a})", "torch.tensor({a})", "torch.tensor([{a}, 1.0])",
             "torch.as_tensor({a}) * {x}", "{y}.softmax(-1) / {a}", "({y} / {a}).softmax(-1)",
             "torch.maximum({x}, torch.tensor({a}))", "{x} > {a}", "{x} == {a}", "torch.fmod({x}, {a})",
             "torch.remainder({x}, {a})", "{x} // {a}", "{x} % {a}", "{x} ** {a}", "{a} ** {x}", "{x}.pow({a})",
             "torch.nn.functional.leaky_relu({y}, {a})", "torch.rsub({x}, {a})", "{y}.addcmul({y}, {y}, value={a})",
             "torch.threshold({y}, {a}, 0.0)", "{x} * ({a} + {b})", "({x} * {a}).sum() / {b}",
             "torch.scalar_tensor({a}) + {x}", "{x}.sum() * {a} + {a}", "{x} * {a} * {a} - {a}",
             "torch.where({x} > {a}, {x}, {a} * 2)", "{x}.lt({a})", "{x}.float().div({a}, rounding_mode='floor')",
             "torch.hardtanh({y}, -abs({a}), abs({a}))", "torch.nn.functional.elu({y}, alpha={a})",
             "{x}.new_full((2,), {a})", "torch.ones(2, dtype={y}.dtype) * {a}", "torch.mul({x}, {a})",
             "torch.true_divide({x}, {a})", "torch.sub({x}, {a})", "{x} / ({a} % 1.5)", "{x} / ({a} * 0.0)",
             "1.0 / ({x} * {a})", "torch.linspace(0.0, {a}, 5)", "torch.full((2, 2), {a}, dtype=torch.float64)",
             "torch.zeros(3).fill_({a})", "torch.tensor({a}).expand(3)", "{x}.new_tensor({a})", "torch.atan2({y}, {y} * 0 + {a})",
             "torch.copysign({y}, {a})", "torch.tensor([{a}, -{a}]) * {b}", "{x} * ({a} ** {n})"]
    form = r.choice(forms)
    return f"{g.new()} = " + form.format(x=xs if "{y}" not in form else x, a=a, b=b, c=c, y=y,
                                         n=f"{x}.shape[0]" if t.dim() else "3")


@float_op(5)
def _fop_branch(g):
    r = g.r
    a = g.fpick()
    b = g.fother()
    x = g.pick(lambda t: t.dtype != torch.bool)
    xf = g.as_float(x)
    n = g.new()
    k = r.choice(["0.5", "0", "0.0", "-1", "1.0", "2"])
    op = r.choice([">", "<", ">=", "<=", "==", "!="])
    forms = [f"if {a} {op} {k}:\n    {n} = {xf} * {a}\nelse:\n    {n} = {xf} - {a}",
             f"if {k} {op} {a}:\n    {n} = {xf} + 1\nelse:\n    {n} = {xf} * {a}",
             f"if {a}:\n    {n} = {xf} / {a}\nelse:\n    {n} = {xf}",
             f"if {a} > {b}:\n    {n} = {xf} * {b}\nelse:\n    {n} = {xf} * {a}",
             f"if 0 < {a} < 1:\n    {n} = {xf} ** 2 * {a}\nelse:\n    {n} = {xf} - 1",
             f"{n} = {xf} * ({a} if {a} > 0 else -{a})",
             f"{n}_k = {a}\n{n}_i = 0\nwhile abs({n}_k) > 0.1 and {n}_i < 5:\n    {n}_k = {n}_k / 2\n    {n}_i += 1\n{n} = {xf} * {n}_k",
             f"{n} = {xf}\nfor {n}_i in range(3):\n    {n} = {n} * {a} + {n}_i",
             f"if {a} != {a}:\n    {n} = {xf} * 0\nelse:\n    {n} = {xf} + {a}",
             f"if {a} > {x}.shape[0] if {x}.dim() else {a} > 1:\n    {n} = {xf} - {a}\nelse:\n    {n} = {xf} + {a}",
             f"{n} = {xf} * (1.0 if {a} >= 0 else -1.0) + ({a} == 0.0)",
             f"if isinstance({a}, float) and {a}.is_integer():\n    {n} = {xf} * 2\nelse:\n    {n} = {xf} * {a}"]
    return r.choice(forms)


@float_op(3)
def _fop_break(g):
    r = g.r
    a = g.fpick()
    x = g.pick(lambda t: t.dtype != torch.bool)
    xf = g.as_float(x)
    n = g.new()
    forms = [f"print('t', round({a}, 3), file=_SINK)\n{n} = {xf} * {a}",
             f"print({a}, {a} * 2, -{a}, file=_SINK)\n{n} = {xf} - {a}",
             f"print(str({a} % 1.0), repr(-{a}), file=_SINK)\n{n} = {xf} * 2",
             f"print(f'{{{a}:.4f}}', file=_SINK)\n{n} = {xf} + {a}",
             f"{n}_u = {a} * 2.0\nprint({x}.shape, file=_SINK)\n{n} = {xf} * {n}_u + {a}",
             f"{n}_v = {xf}.sum().item()\n{n} = {xf} * ({a} + {n}_v)",
             f"{n}_w = {xf} * {a}\nprint('mid', file=_SINK)\n{n} = {n}_w / ({a} * {a} + 1)",
             f"{n} = {xf}[{xf} > {a}]",
             f"{n}_v = float({xf}.sum()) if {xf}.numel() else 0.0\n{n} = {xf} * {n}_v * {a}",
             f"if ({xf} > {a}).any():\n    {n} = {xf} - {a}\nelse:\n    {n} = {xf} + {a}"]
    return r.choice(forms)


@float_op(3)
def _fop_closure(g):
    r = g.r
    a = g.fpick()
    b = g.fother()
    x = g.pick(lambda t: t.dtype != torch.bool)
    xf = g.as_float(x)
    n = g.new()
    forms = [f"def {n}_h(u):\n    return u * {a} + 1\n{n} = {n}_h({xf})",
             f"{n} = (lambda u, k={a}: u / (k * k + 1))({xf})",
             f"{n} = sum({xf} * {a} for _ in range(2))",
             f"{n}_l = [{a}, {b}]\n{n} = {xf} * {n}_l[0] + sum({n}_l)",
             f"{n}_d = {{'t': {a}}}\n{n}_d['u'] = {n}_d['t'] * 2\n{n} = {xf} * {n}_d['u']",
             f"{n} = {xf} * max({a}, 0.1)",
             f"{n}_t = ({a}, {xf})\n{n}_p, {n}_q = {n}_t\n{n} = {n}_q * {n}_p",
             f"def {n}_g():\n    yield {a}\n    yield {a} * 2\n{n} = {xf} * sum({n}_g())",
             f"{n} = torch.tensor([{a}, {b}], dtype=torch.float64).sum() * {xf}"]
    return r.choice(forms)


@float_op(3)
def _fop_inplace(g):
    r = g.r
    a = g.fpick()
    on_arg = r.random() < 0.3
    x = g.pick(lambda t: t.is_floating_point(), args_only=on_arg) if on_arg else g.pick(lambda t: t.is_floating_point())
    t = g.val(x)
    o = r.choice(["mul_({a})", "add_({a})", "clamp_(max={a})", "fill_({a})", "div_({a})", "sub_({a}, alpha=2)",
                  "masked_fill_({x} > 0, {a})", "clamp_min_({a})", "pow_(2).mul_({a})", "lerp_({x} * 0, {a})"])
    if on_arg:
        return f"{x}.{o.format(a=a, x=x)}"
    n = g.new()
    if r.random() < 0.3 and t.dim() >= 1:
        return f"{n} = {x}.clone()\n{n}[0] = {a}\n{n} = {n} * 1"
    return f"{n} = {x}.clone()\n{n}.{o.format(a=a, x=n)}"


# ==================================================================== concatenation
CAT_DTYPES = ["torch.float16", _BF16, "torch.int32", "torch.int64", "torch.bool", "torch.float64",
              "torch.float32", "torch.uint8", "torch.int8"]


def _cat_call(g, tensors, d, kw_dim=None):
    r = g.r
    fn = r.choice(["torch.cat", "torch.cat", "torch.concat", "torch.concatenate"])
    if d is None:
        return f"{fn}({tensors})"
    style = r.random() if kw_dim is None else kw_dim
    if style < 0.5:
        return f"{fn}({tensors}, {d})"
    if fn == "torch.concatenate" and style < 0.75:
        return f"{fn}({tensors}, axis={d})"
    if style < 0.9:
        return f"{fn}({tensors}, dim={d})"
    return f"{fn}(tensors={tensors}, dim={d})"


@float_op(10)
def _fop_cat(g):
    r = g.r
    x = g.pick(lambda t: t.dim() >= 1)
    t = g.val(x)
    nd = t.dim()
    d = g.dim(x)
    same = g.tensors(lambda u: u.shape == t.shape)
    y = r.choice(same)
    n = g.new()
    dt = r.choice(CAT_DTYPES)
    dt2 = r.choice(CAT_DTYPES)
    # float -> integer casts of values out of the type's range are undefined behaviour (eager and
    # generated code may differ): keep the values in range first
    cast = "{v}.to(%s)"
    safe = "{v}.double().nan_to_num().clamp(0, 100).to(%s)"
    c1 = (safe if dt in ("torch.uint8", "torch.int8", "torch.int32", "torch.int64") else cast) % dt
    c2 = (safe if dt2 in ("torch.uint8", "torch.int8", "torch.int32", "torch.int64") else cast) % dt2
    kind = r.random()
    if kind < 0.12:  # a partner with another size along the cat dim (a new argument)
        dims = []
        dd = d % nd
        for i in range(nd):
            if i == dd:
                dims.append(g.new_dim_expr())
            else:
                e = g.dim_expr(x, i)
                if e is None:
                    raise _Reject
                dims.append(e)
        w = g.add_arg(g.tensor_expr(dims, r.choice(["torch.float32", str(t.dtype), "torch.int64", "torch.float64"])))
        lst = r.choice(["[{x}, {w}]", "({w}, {x}, {w})", "[{w}, {x}.to({w}.dtype)]"]).format(x=x, w=w)
        return f"{n} = " + _cat_call(g, lst, d)
    if kind < 0.22:  # 4-d channels_last / contiguous inputs
        dims = g.rand_dims(4)
        dtx = r.choice(["torch.float32", "torch.float32", "torch.float64", "torch.int64", "torch.float16"])
        cl = "_rnd(g, ({}), {}).contiguous(memory_format=torch.channels_last)"
        a1 = Gen.add_arg(g, cl.format(", ".join(dims), dtx), "a")
        second = r.choice(["cl", "contig", "same", "perm"])
        if second == "same":
            a2 = a1
        elif second == "cl":
            a2 = Gen.add_arg(g, cl.format(", ".join(dims), r.choice([dtx, "torch.float32"])), "a")
        elif second == "contig":
            a2 = Gen.add_arg(g, f"_rnd(g, ({', '.join(dims)}), {dtx})", "a")
        else:
            a2 = Gen.add_arg(g, f"_rnd(g, ({dims[0]}, {dims[2]}, {dims[3]}, {dims[1]}), {dtx}).permute(0, 3, 1, 2)", "a")
        cd = r.choice([0, 1, 1, 2, 3, -1, -3, -4])
        order = r.choice(["[{p}, {q}]", "[{q}, {p}]", "({p}, {q}, {p})", "[{p} * 2, {q}[:, :1]]" if cd in (1, -3) else "[{p}, {q}]"])
        expr = _cat_call(g, order.format(p=a1, q=a2), cd)
        tail = r.choice(["", f"\n{n}_s = {n}.stride()", f"\n{n}_cl = {n}.is_contiguous(memory_format=torch.channels_last)",
                         f"\n{n} = {n} + 1", f"\n{n}_s = {n}.contiguous().stride()"])
        return f"{n} = {expr}{tail}"
    if kind < 0.3:  # intentional errors: eager's exception must come out of the compiled call
        g.error_form = True
        forms = [_cat_call(g, f"[{x}, {y}]", nd), _cat_call(g, f"[{x}, {y}]", -nd - 1),
                 _cat_call(g, f"[{x}, {x}.unsqueeze(0)]", 0), _cat_call(g, "[]", 0),
                 _cat_call(g, f"[{x}, {x}.sum()]", 0), _cat_call(g, f"[{x}.sum(), {x}.sum()]", None),
                 _cat_call(g, f"[{x}, {y}[..., :1]]", 0), _cat_call(g, f"{x}", 0),
                 _cat_call(g, f"[{x}, {x}.flatten()[:1]]", -1), f"torch.cat([{x}, {y}], dim=1.5)",
                 _cat_call(g, f"[{x}, torch.zeros(0, 2)]", 0), _cat_call(g, f"[{x}, {y}.mT]", d) if nd >= 2 else
                 _cat_call(g, f"[{x}, {y}[None]]", 0), f"torch.cat([{x}, {y}], 0, out={x}[:0])",
                 _cat_call(g, f"[{x}, {y}.to(torch.complex64)]", d)]
        return f"{n} = " + r.choice(forms)
    xm = f"{x}.mT" if nd >= 2 else x
    ym = f"{y}.mT" if nd >= 2 else y
    forms = [
        ("[{x}, {y_dt}]", d), ("[{x_dt}, {y_dt2}, {x}]", d), ("[{x}, {y}]", d),
        ("[{x}, torch.empty(0)]", d), ("[torch.zeros(0, dtype=torch.int64), {x}]", d),
        ("[torch.empty(0, dtype={dt}), {x}, torch.empty(0)]", d), ("[{x}.narrow({d}, 0, 0), {y}]", d),
        ("[{x}[:0], {x}[:0]]", 0), ("[{x}, {x}.flip({d}), {y}]", d), ("{x}.split(2, {d})", d),
        ("{x}.chunk(3, {d})[::-1]", d), ("list({x}.unbind(0))", None), ("tuple(u * 2 for u in {x}.unbind({d}))", 0 if nd > 1 else None),
        ("[{xm}, {ym}]", d), ("[{xm}.contiguous(), {ym}]", d), ("[{x}[..., ::2], {y}[..., 1::2]]", d),
        ("[{x}, {x}[:1].expand({x}.shape)]", d), ("[{x}.sum().unsqueeze(0), {x}.flatten().to({x}.dtype)]", None),
        ("[{x}, {y}] * 2", -1), ("({x},)", d), ("[{x}.float() * {a}, {x}]", d), ("[{x}, torch.full_like({x}, {a})]", d),
        ("[{x}.unsqueeze({d}), {y}.unsqueeze({d})]", d), ("[{x}.half(), {y}.to(%s)]" % _BF16, d),
        ("[{x}.bool(), {y}.int()]", d), ("[{x}.expand(2, *{x}.shape), {y}[None]]", 0),
    ]
    lst, cd = r.choice(forms)
    a = g.fpick() if g.floats() else "1.5"
    lst = lst.format(x=x, y=y, dt=dt, dt2=dt2, d=d, xm=xm, ym=ym, a=a, y_dt=c1.format(v=y), x_dt=c1.format(v=x),
                     y_dt2=c2.format(v=y))
    if r.random() < 0.08 and cd is not None:  # out=
        return f"{n} = torch.empty(0, dtype={r.choice(['torch.float32', 'torch.float64', str(t.dtype)])})\ntorch.cat({lst}, {cd}, out={n})"
    expr = _cat_call(g, lst, cd)
    tail = r.choice(["", "", "", f"\n{n}_s = {n}.shape", f"\n{n}_s = ({n}.dtype, {n}.stride())", f"\n{n} = {n}.sum({d})"])
    return f"{n} = {expr}{tail}"


# ==================================================================== program assembly
def generate_floats(seed: int) -> Program:
    g = FloatGen(seed)
    r = g.r
    g.init_args()
    g.add_alias_arg()
    g.rebuild()
    target = r.randint(4, 14)
    table = list(OPS) + [(2 * w, fn, name) for w, fn, name in FLOAT_OPS]  # about 45% float / cat ops
    fill(g, table, target, tolerate=(Exception,))
    g.features.append("floats")
    cands = [v for v in g.vars if not v.startswith(("a", "l", "d", "s")) and v in g.env0]
    rets = cands[-r.choice([1, 2, 3]):] if cands else []
    fl = [v for v in g.floats() if v not in rets]
    if fl and r.random() < 0.5:
        rets.append(r.choice(fl))
    if g.list_arg and r.random() < 0.3:
        rets.append(g.list_arg)
    if not rets:
        rets = [g.vars[0]]
    body = "\n".join(g.stmts) + ("\n" if g.stmts else "") + f"return ({', '.join(rets)},)"
    argnames = ", ".join(n for n, _ in g.args)
    src = (HEADER + FLOAT_HEADER.format(ints=_INTS, huge=_HUGE, negzero="-0.0, ") + f"\n_EXTRA_CALLS = {EXTRA_CALLS + (EXTRA_CALLS_TRANSFORMED if _TRANSFORMS else [])!r}\n\n" + g.make_inputs_src() + "\n\n"
           + f"def f({argnames}):\n" + textwrap.indent(body, "    ") + "\n")
    src = f"# kiln fuzz program, seed {seed} (floats)\n" + src
    return Program(seed, src, len(g.stmts), g.expects_error, g.features)
