"""Training-step programs for the fuzzer (a separate branch of ``generator.generate``).

A training program is an ordinary fuzz program (``f``, ``make_inputs``, ``_SINK``) whose inputs
include leaf tensors that require grad (``p*``: float32/float64, contiguous, transposed, strided
or expanded) and small modules (``m*``: ``nn.Linear``, ``nn.LayerNorm``, ``nn.Embedding``,
``nn.Conv1d``, a ``Sequential``; parameters drawn from the seed), whose body computes a loss
through the ordinary op table plus training constructs (``torch.no_grad()``, ``detach()``, in-place
ops on non-leaf tensors, dropout, loss functions, prints into the sink = graph breaks), and which
adds a module-level driver

    def train(fn, args):      # the runner calls train(f, args) and train(compiled_f, args)

that runs 2-3 steps of: (optimizer.zero_grad()), ``out = fn(*args)``, a snapshot of ``out``
(values and requires_grad), ``out[0].backward()`` when the backward is outside ``f`` (else ``f``
itself calls ``loss.backward()``), and an optimizer step (``SGD`` with momentum or ``Adam``) in
the driver or inside ``f`` (then the optimizer is an argument built by ``make_inputs``).
The runner compares the snapshots, the arguments afterwards (values, ``.grad`` of every leaf and
parameter, module buffers, optimizer state).

Which seeds are training programs is decided by a separate ``random.Random`` so that the other
seeds' programs are exactly those of the generator without this branch.
"""
from __future__ import annotations

import random
import textwrap

import torch

from .generator import HEADER, OPS, Gen, Program, _Reject, fill

TRAIN_FRACTION = 0.2

TRAIN_HEADER = '''

def _mod(g, m):
    """A module whose parameters (and float buffers) are drawn from the generator `g`."""
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(_rnd(g, p.shape, p.dtype) * 0.5)
    return m


def _params(args):
    """Leaf tensors that require grad and module parameters among `args`, in order."""
    out = []
    for a in args:
        if isinstance(a, torch.nn.Module):
            out.extend(a.parameters())
        elif isinstance(a, torch.Tensor) and a.requires_grad and a.is_leaf:
            out.append(a)
    return out


def _snap(v):
    """A copy of an output taken right after the call (before backward / the optimizer step)."""
    if isinstance(v, torch.Tensor):
        return v.detach().clone().requires_grad_(v.requires_grad) if v.is_floating_point() else v.clone()
    if isinstance(v, (list, tuple)):
        return type(v)(_snap(u) for u in v)
    if isinstance(v, dict):
        return {k: _snap(u) for k, u in v.items()}
    return v
'''

TRAIN_OPS: list = []  # (weight, fn, name), drawn together with generator.OPS


def train_op(weight):
    def deco(fn):
        TRAIN_OPS.append((weight, fn, fn.__name__.removeprefix("_top_")))
        return fn
    return deco


def is_training_seed(seed: int) -> bool:
    return random.Random(f"kiln-fuzz-train-{seed}").random() < TRAIN_FRACTION


class TrainGen(Gen):
    def __init__(self, seed):
        super().__init__(seed)
        self.r = random.Random(f"kiln-fuzz-train-program-{seed}")
        self.opt_line = None  # make_inputs' optimizer (optimizer inside f)

    # ------------------------------------------------------------- inputs
    def leaf(self, expr, dt):
        return f"({expr}).requires_grad_()" if dt in ("torch.float32", "torch.float64") else expr

    def add_arg(self, expr, prefix="a"):
        # weights that op generators add (matmul operands, broadcast partners) require grad half the time
        if prefix == "a" and ("torch.float32)" in expr or "torch.float64)" in expr) and "requires_grad_" not in expr \
                and self.r.random() < 0.5:
            expr = f"({expr}).requires_grad_()"
            prefix = "p"
        return super().add_arg(expr, prefix)

    def init_args(self):
        r = self.r
        for _ in range(r.choice([1, 2, 2, 3])):
            rank = r.choices([0, 1, 2, 3], [5, 25, 45, 25])[0]
            dt = "torch.float32" if r.random() < 0.8 else "torch.float64"
            grad = r.random() < 0.7
            e = self.tensor_expr(self.rand_dims(rank), dt)
            if grad:
                Gen.add_arg(self, f"({e}).requires_grad_()", "p")
            else:
                Gen.add_arg(self, e, "a")
        if r.random() < 0.2:
            dims = self.rand_dims(r.choice([1, 2]))
            Gen.add_arg(self, self.tensor_expr(dims, "torch.int64"), "a")
        if r.random() < 0.1:
            Gen.add_arg(self, repr(r.choice([2, 3, 0.5, 1.5])), "s")

    def make_inputs_src(self):
        src = super().make_inputs_src()
        if self.opt_line is None:
            return src
        head, ret = src.rstrip("\n").rsplit("\n", 1)
        ret = ret.replace("]", ", opt]") if ret.strip() != "return []" else "    return [opt]"
        return head + "\n" + self.opt_line + "\n" + ret + "\n"

    def fresh_env(self, variant):
        ns = {"__name__": "fuzz_gen"}
        exec(HEADER + TRAIN_HEADER + "\n" + self.make_inputs_src(), ns)
        vals = ns["make_inputs"](self.seed, variant)
        names = [n for n, _ in self.args] + (["opt"] if self.opt_line else [])
        for name, v in zip(names, vals):
            ns[name] = v
        return ns

    # ------------------------------------------------------------- helpers for op generators
    def pick(self, pred=None, **kw):
        # favour tensors that carry gradients
        c = self.tensors(pred, **kw)
        if not c:
            raise _Reject
        gc = [n for n in c if self.val(n).requires_grad]
        if gc and self.r.random() < 0.75:
            c = gc
        w = [1.0 + i for i in range(len(c))]
        return self.r.choices(c, w)[0]

    def grad_tensors(self):
        return [n for n in self.vars if isinstance(self.env0.get(n), torch.Tensor) and self.env0[n].requires_grad
                and self.env0[n].is_floating_point()]

    def static_dim(self, name, i):
        e = self.dim_expr(name, i)
        return e if e is not None and e.isdigit() else None

    def modules(self, cls):
        return [n for n in self.vars if isinstance(self.env0.get(n), cls)]


def _dtype_kw(t):
    return "" if t.dtype == torch.float32 else f", dtype={t.dtype}"


# ==================================================================== training op table
@train_op(6)
def _top_module(g):
    """Apply a (new or existing) module to a float tensor."""
    r = g.r
    x = g.pick(lambda t: t.is_floating_point() and t.dim() >= 1 and t.dtype in (torch.float32, torch.float64))
    t = g.val(x)
    nn = "torch.nn"
    kinds = ["linear", "linear", "layernorm", "seq"] + (["conv1d", "conv1d"] if t.dim() == 3 else [])
    kind = r.choice(kinds)
    dk = _dtype_kw(t)
    existing = [m for m in g.modules(torch.nn.Module)
                if g.val(m).__class__.__name__ in ("Linear", "LayerNorm", "Conv1d", "Sequential")]
    if existing and r.random() < 0.3:  # weight sharing: a module applied twice accumulates its grads
        m = r.choice(existing)
        return f"{g.new()} = {m}({x})"
    if kind == "conv1d":
        c = g.static_dim(x, 1)
        if c is None or int(c) == 0 or t.shape[2] == 0:
            raise _Reject
        k, pad = r.choice([(1, 0), (3, 1), (2, 0)])
        if t.shape[2] + 2 * pad < k:
            raise _Reject
        expr = f"_mod(g, {nn}.Conv1d({c}, {r.choice([1, 2, 4])}, {k}, padding={pad}, bias={r.random() < 0.7}{dk}))"
    else:
        e = g.static_dim(x, t.dim() - 1)
        if e is None:
            raise _Reject
        if kind == "linear":
            expr = f"_mod(g, {nn}.Linear({e}, {r.choice([1, 3, 4, 6])}, bias={r.random() < 0.7}{dk}))"
        elif kind == "layernorm":
            expr = f"_mod(g, {nn}.LayerNorm({e}, elementwise_affine={r.random() < 0.8}{dk}))"
        else:
            h = r.choice([2, 5])
            act = r.choice(["Tanh()", "ReLU()", "GELU()", "Sigmoid()"])
            expr = f"_mod(g, {nn}.Sequential({nn}.Linear({e}, {h}{dk}), {nn}.{act}, {nn}.Linear({h}, {e}{dk})))"
    m = Gen.add_arg(g, expr, "m")
    return f"{g.new()} = {m}({x})"


@train_op(2)
def _top_embedding(g):
    r = g.r
    n_emb, d = r.choice([3, 5, 10]), r.choice([2, 4, 5])
    dims = g.rand_dims(r.choice([1, 2]))
    idx = Gen.add_arg(g, f"torch.randint(0, {n_emb}, ({', '.join(dims)},), generator=g)", "a")
    m = Gen.add_arg(g, f"_mod(g, torch.nn.Embedding({n_emb}, {d}))", "m")
    return f"{g.new()} = {m}({idx})" if r.random() < 0.7 else \
        f"{g.new()} = torch.nn.functional.embedding({idx}, {m}.weight)"


@train_op(3)
def _top_no_grad(g):
    r = g.r
    x = g.pick(lambda t: t.is_floating_point())
    n = g.new()
    forms = [f"with torch.no_grad():\n    {n} = {x}.sin() * 2 + {x}",
             f"with torch.no_grad():\n    {n}_s = {x}.abs().amax() if {x}.numel() else {x}.sum()\n{n} = {x} / ({n}_s + 1)",
             f"with torch.no_grad():\n    {n} = {x} * 1\n    {n}.clamp_(-1, 1)\n{n} = {n} * {x}",
             f"with torch.enable_grad():\n    {n} = {x}.tanh()",
             f"with torch.no_grad():\n    {n}_m = {x}.mean() if {x}.numel() else {x}.sum()\n{n} = ({x} - {n}_m) ** 2"]
    return r.choice(forms)


@train_op(3)
def _top_detach(g):
    x = g.pick(lambda t: t.is_floating_point())
    n = g.new()
    return g.r.choice([f"{n} = {x}.detach() * {x}", f"{n} = {x} - {x}.detach()", f"{n} = {x}.detach().requires_grad_() * 2",
                       f"{n} = ({x} + {x}.detach().sigmoid()).relu()", f"{n} = {x}.data * 3 + {x}"])


@train_op(5)
def _top_inplace_nonleaf(g):
    r = g.r
    x = g.pick(lambda t: t.is_floating_point())
    t = g.val(x)
    n = g.new()
    ops = ["mul_(2)", "add_(1)", "sigmoid_()", "tanh_()", "relu_()", "clamp_(-0.5, 0.5)", "exp_()", "div_(3)",
           f"mul_({x})", f"add_({x}, alpha=0.5)", f"addcmul_({x}, {x}, value=0.1)", f"masked_fill_({x} > 0, 0.0)",
           "neg_()", "sqrt_()", "pow_(2)"]
    o = r.choice(ops)
    base = r.choice([f"{x} * 1", f"{x} + 0", f"{x}.clone()", f"{x}.sin()"])
    if t.dim() >= 1 and r.random() < 0.35:  # in place on a view of a non-leaf
        tgt = r.choice([f"{n}[0]", f"{n}[..., :1]", f"{n}.narrow(-1, 0, 1)", f"{n}.t()" if t.dim() == 2 else f"{n}[0]"])
        if r.random() < 0.3:
            return f"{n} = {base}\n{tgt}.fill_(0.5)\n{n} = {n} * 2"
        return f"{n} = {base}\n{tgt}.{o}\n{n} = {n} + 0"
    if r.random() < 0.2:
        return f"{n} = {base}\n{n}[{'0' if t.dim() else '...'}] = {x}{'[0]' if t.dim() else ''} * 3"
    return f"{n} = {base}\n{n}.{o}"


@train_op(2)
def _top_dropout(g):
    x = g.pick(lambda t: t.is_floating_point())
    F = "torch.nn.functional"
    p = g.r.choice(["0.25", "0.5", "0.1"])
    return f"{g.new()} = " + g.r.choice([f"{F}.dropout({x}, p={p}, training=True)", f"{F}.dropout({x}, {p})",
                                         f"torch.dropout({x}, {p}, True)"])


@train_op(3)
def _top_loss_fn(g):
    r = g.r
    x = g.pick(lambda t: t.is_floating_point() and t.dim() >= 1)
    t = g.val(x)
    F = "torch.nn.functional"
    n = g.new()
    kind = r.choice(["mse", "l1", "smooth_l1", "bce_logits", "ce", "ce"])
    if kind == "ce" and t.dim() == 2:
        c = g.static_dim(x, 1)
        b = g.dim_expr(x, 0)
        if c is None or b is None or int(c) == 0:
            raise _Reject
        tgt = Gen.add_arg(g, f"torch.randint(0, {c}, ({b},), generator=g)", "a")
        extra = r.choice(["", ", label_smoothing=0.1", ", reduction='sum'"])
        return f"{n} = {F}.cross_entropy({x}, {tgt}{extra})"
    if kind == "ce":
        return f"{n} = {x}.log_softmax(-1).mean()"
    y = g.arg_like(x, dt=str(t.dtype))
    fn = {"mse": "mse_loss", "l1": "l1_loss", "smooth_l1": "smooth_l1_loss", "bce_logits": "binary_cross_entropy_with_logits"}[kind]
    if kind == "bce_logits":
        y = f"{y}.sigmoid()"
    return f"{n} = {F}.{fn}({x}, {y}{r.choice(['', ', reduction=' + repr('sum')])})"


@train_op(3)
def _top_break(g):
    """A graph break in the middle of the training forward."""
    x = g.pick(lambda t: t.is_floating_point())
    n = g.new()
    return g.r.choice([f"print('mid', {x}.shape, file=_SINK)\n{n} = {x} * 2",
                       f"print('mid', {x}.detach().sum(), file=_SINK)\n{n} = {x}.cos()",
                       f"{n}_v = {x}.detach().sum().item()\n{n} = {x} * ({n}_v > 0)",
                       f"if {x}.sum() > 0:\n    {n} = {x} * 2\nelse:\n    {n} = -{x}"])


@train_op(2)
def _top_attention(g):
    x = g.pick(lambda t: t.is_floating_point() and t.dim() in (2, 3))
    n = g.new()
    return g.r.choice([f"{n} = torch.softmax({x} @ {x}.mT * 0.5, -1) @ {x}",
                       f"{n} = torch.nn.functional.scaled_dot_product_attention({x}, {x}, {x})" if g.val(x).dim() == 3
                       else f"{n} = torch.softmax({x}, -1) * {x}"])


# ==================================================================== program assembly
LOSS_TERMS = ["{x}.sum()", "{x}.pow(2).mean()", "({x} * {x}).sum() * 0.01", "{x}.abs().mean()", "{x}.tanh().sum()",
              "torch.nn.functional.mse_loss({x}, torch.zeros_like({x}))", "{x}.float().sigmoid().sum()", "{x}.sum() * 0.5"]


def _loss_expr(g):
    r = g.r
    cands = [n for n in g.grad_tensors() if g.val(n).numel() > 0] or g.grad_tensors()
    if not cands:
        return None
    k = min(len(cands), r.choice([1, 1, 2, 3]))
    w = [1.0 + i for i in range(len(cands))]
    picked = []
    for _ in range(k):
        c = r.choices(cands, w)[0]
        if c not in picked:
            picked.append(c)
    terms = []
    for c in picked:
        t = g.val(c)
        terms.append(c if t.dim() == 0 and r.random() < 0.5 else r.choice(LOSS_TERMS).format(x=c))
    return " + ".join(terms)


def _driver(steps, backward_outside, opt_outside):
    lines = ["def train(fn, args):"]
    if opt_outside:
        lines.append(f"    opt = {opt_outside.format(params='_params(args)')}")
    lines.append("    outs = []")
    lines.append(f"    for step in range({steps}):")
    if opt_outside:
        lines.append("        opt.zero_grad()")
    lines.append("        out = fn(*args)")
    lines.append("        outs.append(_snap(out))")
    if backward_outside:
        lines.append("        out[0].backward()")
    if opt_outside:
        lines.append("        opt.step()")
    lines.append("    return outs")
    return "\n".join(lines) + "\n"


OPTIMIZERS = ["torch.optim.SGD({params}, lr=0.05, momentum=0.9)", "torch.optim.SGD({params}, lr=0.1)",
              "torch.optim.Adam({params}, lr=0.01, eps=1e-3)",
              "torch.optim.SGD({params}, lr=0.05, momentum=0.5, nesterov=True, weight_decay=0.01)",
              "torch.optim.Adam({params}, lr=0.02, eps=1e-2, weight_decay=0.1)"]
# Adam's eps is large on purpose: with eps=1e-8 a gradient of rounding-noise size (1e-9) gives a
# full-size step of arbitrary sign, so eager and compiled parameters would differ by 2*lr for
# no fault of the compiler; eps >= 1e-3 keeps the step Lipschitz in the gradient.


def generate_training(seed: int) -> Program:
    g = TrainGen(seed)
    r = g.r
    g.init_args()
    g.add_alias_arg()
    g.rebuild()
    target = r.randint(3, 10)
    table = [(w, fn, name) for w, fn, name in OPS if name not in ("misc",)] + TRAIN_OPS
    fill(g, table, target, tolerate=(Exception,))  # an op generator may trip over a value it did not expect
    g.features.append("training")
    steps = r.choice([2, 3])
    backward_outside = r.random() < 0.55
    opt_choice = None if r.random() < 0.35 else r.choice(OPTIMIZERS)
    opt_inside = opt_choice is not None and not backward_outside and r.random() < 0.5
    opt_outside = opt_choice if opt_choice is not None and not opt_inside else None
    has_params = any(n[0] in "pm" for n, _ in g.args)
    if opt_inside and has_params:
        g.opt_line = "    opt = " + opt_choice.format(params="_params([" + ", ".join(n for n, _ in g.args) + "])")
    body = list(g.stmts)
    loss = None
    if not g.expects_error:
        loss = _loss_expr(g)
    rets_c = [v for v in g.vars if v[0] not in "alpdsm" and v in g.env0]
    others = rets_c[-r.choice([0, 1, 2]):] if rets_c and r.random() < 0.6 else []
    if loss is None:
        rets = others or [g.vars[0]]
        backward_outside = False
        g.opt_line = None
        opt_outside = None
    else:
        body.append(f"loss = {loss}")
        if g.opt_line:
            body.insert(0, "opt.zero_grad()")
            g.features.append("opt_inside")
        if not backward_outside:
            body.append("loss.backward()")
            g.features.append("backward_inside")
            if g.opt_line:
                body.append("opt.step()")
            rets = [r.choice(["loss.detach()", "loss"])] + others
        else:
            rets = ["loss"] + others
    if opt_outside:
        g.features.append("opt_outside")
    if g.expects_error:
        backward_outside = False
    body_src = "\n".join(body) + ("\n" if body else "") + f"return ({', '.join(rets)},)"
    arg_names = [n for n, _ in g.args] + (["opt"] if g.opt_line else [])
    src = (HEADER + TRAIN_HEADER + "\n\n" + g.make_inputs_src() + "\n\n" + f"def f({', '.join(arg_names)}):\n"
           + textwrap.indent(body_src, "    ") + "\n\n\n" + _driver(steps, backward_outside, opt_outside))
    src = f"# kiln fuzz program, seed {seed} (training)\n" + src
    return Program(seed, src, len(body), g.expects_error, g.features)
