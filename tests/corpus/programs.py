"""The break corpus: small programs grouped by the Python construct they exercise.

Each entry of PROGRAMS is a Program(name, group, build, make):
  build()  -> the callable to run (a plain function, or a fresh nn.Module instance);
  make()   -> a tuple of fresh inputs (drawn from this module's own seeded generator).
Programs are deterministic: no random ops inside them. Side effects go to SINK (a StringIO that
print() writes to), LOG (a global list) and STATE (a global dict); the runner resets them before
each call and compares them after, along with the (possibly mutated) arguments and the result.
"""
import collections
import contextlib
import dataclasses
import functools
import io
import itertools
import math
import operator
import os
import zlib
from collections import Counter, OrderedDict, defaultdict, deque, namedtuple
from typing import Optional

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

PROGRAMS = []
Program = namedtuple("Program", "name group build make")

SINK = io.StringIO()
LOG = []
STATE = {"calls": 0}

_GEN = torch.Generator().manual_seed(0)


def seed_inputs(name):
    """Reseed the input generator from the program's name (reproducible inputs per program)."""
    _GEN.manual_seed(zlib.crc32(name.encode()))


def reset_side_effects():
    SINK.seek(0)
    SINK.truncate()
    LOG.clear()
    STATE.clear()
    STATE["calls"] = 0


def side_effects():
    return {"sink": SINK.getvalue(), "log": list(LOG), "state": dict(STATE)}


def randn(*shape, requires_grad=False):
    return torch.randn(*shape, generator=_GEN).requires_grad_(requires_grad)


def rand(*shape):
    return torch.rand(*shape, generator=_GEN)


def randint(lo, hi, *shape):
    return torch.randint(lo, hi, shape, generator=_GEN)


# ---- input makers -------------------------------------------------------------------------------
def x1():
    return (randn(4, 8),)


def x2():
    return (randn(4, 8), randn(4, 8))


def x3d():
    return (randn(2, 4, 8),)


def xg():
    return (randn(4, 8, requires_grad=True),)


def xpos():
    return (rand(4, 8) + 0.5,)


def xlist():
    return ([randn(4), randn(4), randn(4)],)


def xdict():
    return ({"a": randn(4), "b": randn(4)},)


def prog(group, make=x1):
    """Register a function (or an nn.Module class, built fresh per run) as a corpus program."""
    def deco(obj):
        if isinstance(obj, type):
            build = obj
        else:
            def build(fn=obj):
                return fn
        PROGRAMS.append(Program(obj.__name__, group, build, make))
        return obj
    return deco


def fill_(module, start=0.1):
    """Deterministic parameters for a module built inside a program (overwrites its random init)."""
    with torch.no_grad():
        for i, p in enumerate(module.parameters()):
            p.copy_(torch.linspace(-start * (i + 1), start * (i + 1), p.numel()).view_as(p))
    return module


# =================================================================================================
# print
# =================================================================================================
@prog("print")
def print_shape(x):
    y = x * 2
    print("shape", y.shape, file=SINK)
    return y + 1


@prog("print")
def print_tensor_value(x):
    y = (x * 100).round() / 100
    print(y[0, :3], file=SINK)
    return y.sum(0)


@prog("print")
def print_sep_end(x):
    print(f"n={x.numel()}", x.dim(), x.dtype, sep="|", end="!\n", file=SINK)
    return x.relu()


@prog("print")
def print_stdout(x):
    y = x.abs()
    print("to stdout", tuple(y.shape))  # the runner captures sys.stdout
    return y * 3


@prog("print")
def print_in_loop(x):
    for i in range(3):
        x = x * 2 - 1
        print("step", i, file=SINK)
    return x


@prog("print")
def print_item(x):
    s = x.sum()
    print(f"sum={s.item():.3f}", file=SINK)
    return x - s


# =================================================================================================
# branches on tensor values
# =================================================================================================
@prog("tensor_branch")
def branch_sum_positive(x):
    y = x * 3
    if y.sum() > 0:
        return y + 1
    return y - 1


@prog("tensor_branch")
def branch_all(x):
    if (x > -10).all():
        x = x.sigmoid()
    return x * 2


@prog("tensor_branch")
def branch_elif(x):
    m = x.max()
    if m > 2:
        y = x / m
    elif m > 1:
        y = x * 2
    else:
        y = x - 1
    return y.tanh()


@prog("tensor_branch")
def branch_while_norm(x):
    n = 0
    while x.abs().max() > 0.5:
        x = x / 2
        n += 1
    return x, n


@prog("tensor_branch")
def branch_ternary(x):
    y = x if x.mean() > 0 else -x
    return y.exp()


@prog("tensor_branch", x2)
def branch_any_and(x, y):
    if bool((x > 3).any()) and y.sum() < 100:
        return x + y
    return x - y


@prog("tensor_branch")
def branch_assert(x):
    assert torch.isfinite(x).all(), "non-finite input"
    return x.softmax(-1)


@prog("tensor_branch")
def branch_nan_check(x):
    y = x.log()
    if torch.isnan(y).any():
        y = torch.nan_to_num(y, nan=0.0)
    return y


# =================================================================================================
# .item() / .tolist()
# =================================================================================================
@prog("item_tolist")
def item_scale(x):
    s = x.sum().item()
    return x * s


@prog("item_tolist")
def item_argmax_index(x):
    idx = int(x.argmax())
    return x.flatten()[idx] * x


@prog("item_tolist")
def tolist_sum(x):
    rows = x.tolist()
    total = sum(rows[0])
    return x + total, len(rows)


@prog("item_tolist")
def float_mean(x):
    m = float(x.mean())
    return x - m, round(m, 4)


def _split_inputs():
    return (randn(6, 4), torch.tensor([2, 1, 3]))


@prog("item_tolist", _split_inputs)
def tolist_split_sizes(x, lengths):
    parts = torch.split(x, lengths.tolist())
    return [p.sum(0) for p in parts]


@prog("item_tolist")
def item_in_loop(x):
    vals = []
    for row in x:
        vals.append(row.max().item())
    return torch.tensor(vals) + x.mean(1), max(vals) > -100


@prog("item_tolist")
def item_python_arith(x):
    a = x[0, 0].item()
    b = x[1, 1].item()
    c = a * 2 + b if a > b else b * 2 + a
    return torch.full((2,), c) + x[0, :2]


# =================================================================================================
# torch.nonzero / boolean masking
# =================================================================================================
@prog("nonzero_mask")
def nonzero_indices(x):
    return torch.nonzero(x > 0)


@prog("nonzero_mask")
def bool_mask_select(x):
    return x[x > 0].sum() + x.mean()


@prog("nonzero_mask")
def bool_mask_assign(x):
    x = x.clone()
    x[x < 0] = 0
    return x


@prog("nonzero_mask")
def masked_select_(x):
    return torch.masked_select(x, x.abs() > 0.5) * 2


@prog("nonzero_mask")
def where_one_arg(x):
    rows, cols = torch.where(x > 1)
    return rows * 10 + cols


@prog("nonzero_mask")
def nonzero_as_tuple(x):
    idx = (x > 0).nonzero(as_tuple=True)
    return x[idx].sum(), idx[0].numel()


@prog("nonzero_mask")
def unique_values(x):
    return torch.unique((x * 2).round())


@prog("nonzero_mask")
def mask_then_mean_rows(x):
    keep = x.sum(1) > 0
    sel = x[keep]
    return sel.mean(0) if sel.shape[0] > 0 else x.mean(0)


# =================================================================================================
# numpy interop
# =================================================================================================
@prog("numpy")
def numpy_roundtrip(x):
    a = x.numpy()
    return torch.from_numpy(a * 2)


@prog("numpy")
def numpy_sqrt_dim(x):
    return x / np.sqrt(x.shape[-1])


@prog("numpy")
def numpy_float32_scalar(x):
    return x * np.float32(2.5) + np.float64(0.5)


@prog("numpy")
def numpy_prod_shape(x):
    n = int(np.prod(x.shape))
    return x.reshape(n) * 2


@prog("numpy")
def numpy_array_to_tensor(x):
    w = np.array([1.0, 2.0, 3.0, 4.0], dtype=np.float32)
    return x * torch.as_tensor(w).view(4, 1)


@prog("numpy")
def numpy_mean_value(x):
    m = x.detach().numpy().mean()
    return x - float(m)


@prog("numpy")
def numpy_constants(x):
    return torch.sin(x * np.pi) + np.log(2.0)


@prog("numpy")
def numpy_clip_scalar(x):
    k = np.clip(x.shape[0] * 3, 0, 10)
    return x * int(k)


# =================================================================================================
# itertools
# =================================================================================================
@prog("itertools", xlist)
def iter_chain(xs):
    out = 0
    for t in itertools.chain(xs, [xs[0] * 2]):
        out = out + t
    return out


@prog("itertools")
def iter_product(x):
    out = []
    for i, j in itertools.product(range(2), range(3)):
        out.append(x[i, j] * (i + j))
    return torch.stack(out)


@prog("itertools", xlist)
def iter_accumulate(xs):
    return list(itertools.accumulate(xs))


@prog("itertools", xlist)
def iter_accumulate_mul(xs):
    return list(itertools.accumulate(xs, operator.mul))[-1]


@prog("itertools")
def iter_islice(x):
    return torch.stack(list(itertools.islice(iter(x), 1, 4, 2)))


@prog("itertools")
def iter_combinations(x):
    return sum(x[a] * x[b] for a, b in itertools.combinations(range(4), 2))


@prog("itertools", xlist)
def iter_zip_longest(xs):
    out = []
    for a, b in itertools.zip_longest(xs, [1.0, 2.0], fillvalue=0.5):
        out.append(a * b)
    return out


@prog("itertools")
def iter_repeat_count(x):
    out = x
    for k, s in zip(itertools.count(1), itertools.repeat(0.5, 3)):
        out = out * s + k
    return out


# =================================================================================================
# functools
# =================================================================================================
@prog("functools")
def partial_torch_fn(x):
    act = functools.partial(F.leaky_relu, negative_slope=0.2)
    return act(x)


def _scale_add(x, y, *, scale=1.0):
    return x * scale + y


@prog("functools", x2)
def partial_user_fn_kwargs(x, y):
    f = functools.partial(_scale_add, scale=3.0)
    return f(x, y=y)


@prog("functools", xlist)
def reduce_add(xs):
    return functools.reduce(operator.add, xs)


@prog("functools", xlist)
def reduce_lambda_init(xs):
    return functools.reduce(lambda acc, t: acc * 0.5 + t, xs, torch.zeros(4))


@functools.lru_cache(maxsize=None)
def _positions(n, d):
    return tuple(math.sin(i / (d + 1)) for i in range(n))


@prog("functools")
def lru_cache_helper(x):
    pos = _positions(x.shape[0], x.shape[1])
    return x + torch.tensor(pos).unsqueeze(1)


def _logged(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs) * 2
    return wrapper


@_logged
def _double_relu(x):
    return x.relu()


@prog("functools")
def wraps_decorator(x):
    return _double_relu(x) + len(_double_relu.__name__)


@functools.lru_cache(maxsize=8)
def _mask(n):
    return torch.ones(n, n).tril()


@prog("functools")
def lru_cache_tensor(x):
    m = _mask(x.shape[0])
    return x[:, :4] * m


# =================================================================================================
# sets and frozensets
# =================================================================================================
@prog("sets")
def set_of_dims(x):
    dims = set(x.shape)
    return x * len(dims), sorted(dims)


@prog("sets")
def set_add_membership(x):
    seen = set()
    out = x
    for k in (1, 2, 1, 3, 2):
        if k in seen:
            continue
        seen.add(k)
        out = out + k
    return out, len(seen)


ACTS = frozenset({"relu", "gelu"})


@prog("sets")
def frozenset_membership(x):
    out = x
    for name in ("relu", "tanh", "gelu"):
        if name in ACTS:
            out = getattr(F, name)(out)
    return out


@prog("sets")
def set_algebra(x):
    a = {1, 2, 3}
    b = {2, 3, 4}
    return x * sum(a & b) + sum(a | b) - sum(a - b), sorted(a ^ b)


@prog("sets")
def set_comprehension(x):
    s = {i % 3 for i in range(10)}
    return x + max(s), frozenset(s)


@prog("sets")
def set_discard_update(x):
    s = set(range(5))
    s.discard(2)
    s.update([7, 8])
    s.remove(0)
    return x * len(s), s


# =================================================================================================
# namedtuple
# =================================================================================================
Pair = namedtuple("Pair", ["left", "right"])


@prog("namedtuple", x2)
def namedtuple_create(x, y):
    p = Pair(x + 1, y * 2)
    return p.left + p.right


@prog("namedtuple", x2)
def namedtuple_return(x, y):
    return Pair(left=x.sum(0), right=y.max(0).values)


@prog("namedtuple", x2)
def namedtuple_replace(x, y):
    p = Pair(x, y)
    q = p._replace(right=y * 3)
    return q, q._fields


def _pair_input():
    return (Pair(randn(4), randn(4)),)


@prog("namedtuple", _pair_input)
def namedtuple_input_unpack(p):
    a, b = p
    return a * b + p[0]


@prog("namedtuple")
def namedtuple_torch_return(x):
    r = torch.max(x, dim=1)
    return r.values * 2, r.indices, r[0].sum()


# =================================================================================================
# collections: deque / defaultdict / OrderedDict / Counter
# =================================================================================================
@prog("collections")
def deque_window(x):
    q = deque(maxlen=2)
    for row in x:
        q.append(row)
    return q[0] + q[-1], len(q)


@prog("collections")
def deque_popleft_appendleft(x):
    q = deque([x, x * 2])
    q.appendleft(x - 1)
    a = q.popleft()
    q.rotate(1)
    return a + q[0] - q.pop()


@prog("collections")
def defaultdict_list(x):
    groups = defaultdict(list)
    for i, row in enumerate(x):
        groups[i % 2].append(row)
    return {k: torch.stack(v).sum(0) for k, v in groups.items()}


@prog("collections")
def defaultdict_int(x):
    counts = defaultdict(int)
    for d in x.shape:
        counts[d] += 1
    return x * counts[4], dict(counts)


@prog("collections")
def ordereddict_move_to_end(x):
    d = OrderedDict()
    d["a"] = x
    d["b"] = x * 2
    d["c"] = x * 3
    d.move_to_end("a")
    d.popitem(last=False)
    return list(d.keys()), sum(d.values())


@prog("collections")
def counter_most_common(x):
    c = Counter("abracadabra")
    (top, n), = c.most_common(1)
    return x * n, top, c["z"]


@prog("collections")
def counter_update_tensor(x):
    c = Counter()
    for name in ["w", "b", "w", "w"]:
        c[name] += 1
    c.update({"b": 2})
    return x * c["w"] + c["b"], sorted(c.items())


@prog("collections")
def deque_extend_iter(x):
    q = deque()
    q.extend(x.unbind(0))
    out = torch.zeros(8)
    while q:
        out = out + q.pop()
    return out


# =================================================================================================
# dict construction
# =================================================================================================
@prog("dict_construct")
def dict_from_pairs(x):
    d = dict([("a", x), ("b", x * 2)])
    return d["a"] + d["b"], list(d)


@prog("dict_construct")
def dict_fromkeys(x):
    d = dict.fromkeys(["u", "v", "w"], 0)
    d["v"] = 2
    return x * sum(d.values()), d


@prog("dict_construct")
def dict_comprehension(x):
    d = {f"r{i}": x[i] * i for i in range(x.shape[0])}
    return d


@prog("dict_construct", x2)
def dict_zip(x, y):
    d = dict(zip(("x", "y"), (x, y)))
    return d["x"] - d["y"]


@prog("dict_construct", x2)
def dict_unpack_merge(x, y):
    a = {"x": x, "k": 1}
    b = {"y": y, "k": 2}
    m = {**a, **b}
    return m["x"] * m["k"] + m["y"]


@prog("dict_construct")
def dict_kwargs_ctor(x):
    d = dict({"a": 1}, b=2, c=3)
    d.update(a=5)
    d.setdefault("e", 7)
    return x * d["a"] + d.get("zz", 0) + d["e"], d


@prog("dict_construct", x2)
def dict_or_operator(x, y):
    d = {"a": x} | {"b": y}
    d |= {"c": x * y}
    return d


@prog("dict_construct")
def dict_pop_del(x):
    d = {"a": x, "b": x + 1, "c": x + 2}
    b = d.pop("b")
    del d["a"]
    return b + d.pop("missing", 0) + d["c"], list(d)


# =================================================================================================
# dict views
# =================================================================================================
@prog("dict_views")
def keys_view_live(x):
    d = {"a": x}
    keys = d.keys()
    d["b"] = x * 2
    return len(keys), list(keys), d["b"]


@prog("dict_views")
def values_view_live(x):
    d = {"a": x}
    vals = d.values()
    d["b"] = x + 1
    return sum(vals)


@prog("dict_views")
def items_view_live(x):
    d = {"a": 1}
    items = d.items()
    d["b"] = 2
    out = x
    for k, v in items:
        out = out * v
    return out, ("b", 2) in items


@prog("dict_views")
def keys_set_ops(x):
    d = {"a": 1, "b": 2, "c": 3}
    common = d.keys() & {"b", "c", "z"}
    return x * len(common), sorted(common), "a" in d.keys()


@prog("dict_views", xdict)
def arg_dict_views(d):
    total = 0
    for k in sorted(d.keys()):
        total = total + d[k]
    return total, len(d.items())


# =================================================================================================
# sorted / min / max with key
# =================================================================================================
@prog("sorting")
def sorted_key_lambda(x):
    names = ["ccc", "a", "bb"]
    order = sorted(names, key=lambda s: len(s))
    return x * len(order[0]), order


@prog("sorting", xlist)
def sorted_tensors_by_shape(xs):
    ys = [xs[0][:2], xs[1], xs[2][:3]]
    return sorted(ys, key=lambda t: t.shape[0], reverse=True)


@prog("sorting")
def min_max_key(x):
    d = {"a": 3, "b": 1, "c": 2}
    lo = min(d, key=d.get)
    hi = max(d.items(), key=lambda kv: kv[1])
    return x * d[lo] + hi[1], lo, hi


@prog("sorting", xlist)
def max_tensor_key(xs):
    return max(xs, key=lambda t: t.sum())


@prog("sorting")
def sorted_dict_items(x):
    d = {"w2": 2, "w1": 1, "w3": 3}
    out = x
    for k, v in sorted(d.items()):
        out = out * v + len(k)
    return out


@prog("sorting")
def sorted_tuples_reverse(x):
    pairs = [(2, "b"), (1, "a"), (3, "c")]
    ranked = sorted(pairs, reverse=True)
    return x + ranked[0][0], [p[1] for p in ranked]


# =================================================================================================
# modules created inside the function
# =================================================================================================
@prog("module_inside")
def linear_in_forward(x):
    lin = fill_(nn.Linear(8, 3))
    return lin(x)


@prog("module_inside")
def modulelist_in_forward(x):
    layers = nn.ModuleList([fill_(nn.Linear(8, 8), 0.05 * (i + 1)) for i in range(2)])
    for layer in layers:
        x = torch.relu(layer(x))
    return x


@prog("module_inside")
def sequential_in_forward(x):
    net = nn.Sequential(nn.LayerNorm(8), nn.GELU(), nn.Dropout(0.0))
    return net(x)


@prog("module_inside")
def layernorm_functional_params(x):
    ln = nn.LayerNorm(x.shape[-1], elementwise_affine=False)
    return ln(x) * 2


@prog("module_inside")
def local_module_class(x):
    class Scale(nn.Module):
        def __init__(self, s):
            super().__init__()
            self.s = s

        def forward(self, t):
            return t * self.s

    return Scale(3.0)(x) + Scale(0.5)(x)


class BuildsInForward(nn.Module):
    def forward(self, x):
        proj = fill_(nn.Linear(x.shape[-1], 4))
        return proj(x).softmax(-1)


prog("module_inside")(BuildsInForward)


# =================================================================================================
# tensor.type()
# =================================================================================================
@prog("tensor_type")
def type_string(x):
    return x * 2, x.type()


@prog("tensor_type")
def type_branch(x):
    if x.type() == "torch.FloatTensor":
        return x + 1
    return x - 1


@prog("tensor_type")
def type_convert(x):
    return x.type(torch.float64) * 2


@prog("tensor_type")
def type_string_convert(x):
    return x.type("torch.DoubleTensor").sum(), x.int().type()


# =================================================================================================
# list slice assignment and list methods
# =================================================================================================
@prog("list_ops", xlist)
def list_slice_assign(xs):
    ys = list(xs)
    ys[1:2] = [xs[1] * 2, xs[1] * 3]
    return ys


@prog("list_ops")
def list_del_step(x):
    rows = list(x.unbind(0))
    del rows[::2]
    return torch.stack(rows)


@prog("list_ops")
def list_reverse_slice(x):
    rows = list(x)
    return torch.stack(rows[::-1])


@prog("list_ops", xlist)
def list_full_slice_replace(xs):
    ys = [0, 1, 2]
    ys[:] = [t + 1 for t in xs]
    ys.insert(0, xs[0] * 0)
    ys.extend([xs[2]])
    last = ys.pop()
    return ys, last


@prog("list_ops")
def list_index_count(x):
    names = ["a", "b", "a", "c"]
    return x * names.index("c") + names.count("a")


@prog("list_ops")
def list_sort_inplace(x):
    vals = [3, 1, 2]
    vals.sort(reverse=True)
    vals.reverse()
    return x * vals[0] + vals[-1], vals


# =================================================================================================
# torch.distributions (no sampling)
# =================================================================================================
@prog("distributions")
def normal_log_prob(x):
    d = torch.distributions.Normal(torch.zeros(8), torch.ones(8) * 2)
    return d.log_prob(x)


@prog("distributions", x2)
def normal_entropy_params(x, y):
    d = torch.distributions.Normal(x, y.abs() + 0.1)
    return d.entropy() + d.mean - d.stddev


@prog("distributions")
def categorical_log_prob(x):
    d = torch.distributions.Categorical(logits=x)
    return d.log_prob(torch.tensor([0, 1, 2, 3])), d.entropy()


@prog("distributions")
def normal_no_validate(x):
    d = torch.distributions.Normal(x, 1.0, validate_args=False)
    return d.log_prob(x * 0.5), d.cdf(x)


@prog("distributions", xpos)
def bernoulli_probs(x):
    d = torch.distributions.Bernoulli(probs=x / 2)
    return d.log_prob(torch.ones(4, 8)), d.variance


# =================================================================================================
# dataclasses
# =================================================================================================
@dataclasses.dataclass
class Acc:
    total: torch.Tensor
    count: int = 0
    tags: list = dataclasses.field(default_factory=list)


@prog("dataclass")
def dataclass_create_mutate(x):
    a = Acc(torch.zeros(8))
    for row in x:
        a.total = a.total + row
        a.count += 1
    a.tags.append("done")
    return a.total / a.count, a.tags


@prog("dataclass")
def dataclass_return(x):
    return Acc(x * 2, 3, ["r"])


@dataclasses.dataclass(frozen=True)
class Cfg:
    hidden: int = 8
    scale: float = 0.5


@prog("dataclass")
def dataclass_frozen_replace(x):
    c = Cfg()
    c2 = dataclasses.replace(c, scale=2.0)
    return x * c2.scale + c.hidden


@prog("dataclass")
def dataclass_fields_asdict(x):
    c = Cfg(hidden=4)
    names = [f.name for f in dataclasses.fields(c)]
    return x[:, : c.hidden] * len(names), dataclasses.asdict(c)


def _acc_input():
    return (Acc(randn(8), 1, []), randn(4, 8))


@prog("dataclass", _acc_input)
def dataclass_arg_mutated(acc, x):
    acc.total = acc.total + x.sum(0)
    acc.count += x.shape[0]
    acc.tags.append("seen")
    return acc.total * 2


# =================================================================================================
# ModelOutput-like OrderedDict subclasses
# =================================================================================================
class Output(OrderedDict):
    """A small transformers.ModelOutput: a dataclass whose non-None fields are also dict items."""

    def __post_init__(self):
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if v is not None:
                self[f.name] = v

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        super().__setattr__(key, value)

    def __setattr__(self, name, value):
        if name in self.keys() and value is not None:
            super().__setitem__(name, value)
        super().__setattr__(name, value)

    def __getitem__(self, k):
        if isinstance(k, str):
            return dict(self.items())[k]
        return self.to_tuple()[k]

    def to_tuple(self):
        return tuple(self[k] for k in self.keys())


@dataclasses.dataclass
class LMOutput(Output):
    logits: Optional[torch.Tensor] = None
    loss: Optional[torch.Tensor] = None
    hidden: Optional[torch.Tensor] = None


@prog("model_output")
def model_output_create(x):
    out = LMOutput(logits=x * 2)
    return out


@prog("model_output")
def model_output_attr_assign(x):
    out = LMOutput(logits=x)
    out.loss = x.pow(2).mean()
    return out, list(out.keys())


@prog("model_output")
def model_output_item_assign(x):
    out = LMOutput(logits=x)
    out["hidden"] = x.relu()
    return out.hidden + out["logits"], out.to_tuple()


@prog("model_output")
def model_output_index_getattr(x):
    out = LMOutput(logits=x.softmax(-1), loss=x.sum())
    return out[0] * 2, out.to_tuple()[1], getattr(out, "hidden", "missing")


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = fill_(nn.Linear(8, 5))

    def forward(self, x, labels=None, return_dict=True):
        logits = self.proj(x)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits, labels)
        if not return_dict:
            return (logits,) if loss is None else (loss, logits)
        return LMOutput(logits=logits, loss=loss)


def _lm_inputs():
    return (randn(4, 8), randint(0, 5, 4))


prog("model_output", _lm_inputs)(TinyLM)


# =================================================================================================
# torch.finfo / torch.iinfo
# =================================================================================================
@prog("finfo_iinfo")
def finfo_min_mask(x):
    mask = torch.ones(4, 8).tril().bool()
    return x.masked_fill(~mask, torch.finfo(x.dtype).min).softmax(-1)


@prog("finfo_iinfo")
def finfo_eps(x):
    eps = torch.finfo(torch.float32).eps
    return x / (x.norm(dim=-1, keepdim=True) + eps)


@prog("finfo_iinfo")
def iinfo_max(x):
    big = torch.iinfo(torch.int32).max
    return x.clamp(max=big // 2**28), big


@prog("finfo_iinfo")
def finfo_half_max(x):
    fi = torch.finfo(torch.float16)
    return x.clamp(-fi.max, fi.max) * fi.tiny, fi.bits


# =================================================================================================
# os.environ
# =================================================================================================
@prog("os_environ")
def environ_flag(x):
    if os.environ.get("KILN_CORPUS_FLAG", "0") == "1":
        return x * 100
    return x + 1


@prog("os_environ")
def environ_default_int(x):
    n = int(os.environ.get("KILN_CORPUS_REPEAT", "3"))
    for _ in range(n):
        x = x * 0.5
    return x


@prog("os_environ")
def getenv_in(x):
    debug = os.getenv("KILN_CORPUS_DEBUG") is not None or "KILN_CORPUS_OTHER" in os.environ
    return x * (2 if debug else 3)


# =================================================================================================
# try / except
# =================================================================================================
@prog("try_except")
def try_keyerror(x):
    d = {"a": x}
    try:
        y = d["b"]
    except KeyError:
        y = x * 2
    return y + d["a"]


@prog("try_except")
def try_indexerror(x):
    xs = [x]
    try:
        return xs[3]
    except IndexError as e:
        return x * len(str(e))


@prog("try_except")
def try_else_finally(x):
    out = [x]
    try:
        y = x + 1
    except ValueError:
        y = x
    else:
        y = y * 2
    finally:
        out.append(x * 3)
    return y, out


class _Stop(Exception):
    pass


def _raise_if(flag):
    if flag:
        raise _Stop("stop")
    return 1


@prog("try_except")
def try_custom_raise(x):
    try:
        k = _raise_if(x.shape[0] == 4)
    except _Stop:
        k = 5
    return x * k


@prog("try_except")
def try_attribute_error(x):
    obj = object()
    try:
        v = obj.missing
    except AttributeError:
        v = 0.5
    return x * v


@prog("try_except")
def try_tensor_in_body(x):
    try:
        y = x.view(-1, 3)
    except RuntimeError:
        y = x.reshape(-1, 2)
    return y.sum(1)


# =================================================================================================
# torch.no_grad containing a break
# =================================================================================================
@prog("no_grad_break", xg)
def no_grad_print(x):
    with torch.no_grad():
        y = x * 2
        print("in no_grad", y.requires_grad, file=SINK)
        z = y + 1
    return z, z.requires_grad


@prog("no_grad_break", xg)
def no_grad_item(x):
    with torch.no_grad():
        s = x.sum().item()
        y = x * s
    return y + x


@prog("no_grad_break", xg)
def enable_grad_inside_no_grad(x):
    with torch.no_grad():
        a = x * 2
        if a.sum() > 0:
            a = a + 1
        with torch.enable_grad():
            b = x * 3
    return a, b, b.requires_grad


@prog("no_grad_break", xg)
def no_grad_decorator(x):
    @torch.no_grad()
    def helper(t):
        print("helper", file=SINK)
        return t * 2

    return helper(x) + x


@prog("no_grad_break", xg)
def inference_mode_break(x):
    with torch.inference_mode():
        y = x * 2
        print("im", file=SINK)
        y = y + 1
    return y.clone()


# =================================================================================================
# breaks inside loops
# =================================================================================================
@prog("loop_break")
def loop_print_each(x):
    for i in range(3):
        x = x + i
        print(i, file=SINK)
        x = x * 0.5
    return x


@prog("loop_break")
def loop_over_rows_item(x):
    total = torch.zeros(8)
    for row in x:
        if row.sum().item() > 0:
            total = total + row
    return total


@prog("loop_break")
def loop_early_break(x):
    for i in range(x.shape[0]):
        if x[i].max() > 1.5:
            break
        x = x * 1.1
    return x, i


@prog("loop_break")
def loop_while_counter(x):
    steps = 0
    while steps < 4:
        x = x.tanh() * 2
        steps += 1
        if steps == 2:
            LOG.append(("half", steps))
    return x


@prog("loop_break")
def loop_nested_tensor_cond(x):
    out = x
    for i in range(2):
        for j in range(2):
            if out[i, j] > 0:
                out = out + 1
            else:
                out = out - 1
    return out


# =================================================================================================
# breaks inside nested calls
# =================================================================================================
def _noisy(t):
    print("noisy", t.shape, file=SINK)
    return t * 2


def _outer(t):
    return _noisy(t + 1) - 1


@prog("nested_break")
def nested_print_one_level(x):
    return _noisy(x).relu()


@prog("nested_break")
def nested_print_two_levels(x):
    y = x * 3
    return _outer(y) + y


def _scale_from_item(t):
    return t * t.abs().max().item()


@prog("nested_break")
def nested_item(x):
    return _scale_from_item(x + 1) - x


def _branchy(t):
    if t.mean() > 0:
        return t.exp()
    return t.neg()


@prog("nested_break")
def nested_tensor_branch(x):
    a = _branchy(x)
    b = _branchy(-x)
    return a + b


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = fill_(nn.Linear(8, 8))

    def forward(self, x):
        h = self.lin(x)
        LOG.append(tuple(h.shape))
        return h.relu()


class TwoBlocks(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block(), Block()])

    def forward(self, x):
        for b in self.blocks:
            x = b(x) + x
        return x


prog("nested_break")(TwoBlocks)


# =================================================================================================
# string formatting
# =================================================================================================
@prog("string_format")
def fstring_shape(x):
    return x * 2, f"{x.shape}"


@prog("string_format")
def format_size(x):
    return "{} x {}".format(*x.size()), "%d rows" % x.shape[0], str(x.dtype)


@prog("string_format")
def fstring_dict_keys(x):
    d = {}
    for i in range(3):
        d[f"layer_{i}.weight"] = x * i
    return d


@prog("string_format")
def join_shapes(x):
    s = ",".join(str(d) for d in x.shape)
    return x + len(s), s


@prog("string_format")
def repr_size_split(x):
    r = repr(x.shape)
    parts = "a.b.c".split(".")
    return x * len(parts), r, "-".join(parts).upper()


@prog("string_format")
def fstring_float_spec(x):
    m = x.shape[1] / 3
    return x * 2, f"{m:.2f}|{x.shape[0]:>4}|{'ok'!r}"


@prog("string_format")
def str_methods(x):
    name = "Encoder.Layer.0"
    if name.lower().startswith("encoder") and name.endswith("0"):
        x = x * 2
    return x, name.replace(".", "/"), name.partition(".")[2]


# =================================================================================================
# isinstance
# =================================================================================================
@prog("isinstance")
def isinstance_tensor(x):
    if isinstance(x, torch.Tensor):
        return x * 2
    return x


@prog("isinstance", xlist)
def isinstance_list_tuple(xs):
    if isinstance(xs, (list, tuple)):
        return torch.stack(xs)
    return xs


@prog("isinstance")
def isinstance_module(x):
    m = nn.ReLU()
    if isinstance(m, (nn.ReLU, nn.GELU)) and not isinstance(m, nn.Linear):
        return m(x)
    return x


def _scalar_input():
    return (randn(4), 3, 2.5)


@prog("isinstance", _scalar_input)
def isinstance_scalars(x, n, f):
    out = x
    for v in (n, f, "s", None):
        if isinstance(v, bool):
            continue
        if isinstance(v, int):
            out = out + v
        elif isinstance(v, float):
            out = out * v
    return out


@prog("isinstance")
def type_is_checks(x):
    t = (1, 2)
    if type(t) is tuple and type(x) is torch.Tensor and issubclass(nn.Linear, nn.Module):
        return x + 1
    return x


# =================================================================================================
# getattr / hasattr / setattr
# =================================================================================================
class _Conf:
    scale = 2.0


@prog("getattr")
def getattr_default(x):
    c = _Conf()
    return x * getattr(c, "scale", 1.0) + getattr(c, "shift", 0.5)


@prog("getattr")
def hasattr_branch(x):
    c = _Conf()
    if hasattr(c, "bias"):
        x = x + c.bias
    if hasattr(x, "shape"):
        x = x * 2
    return x


@prog("getattr")
def setattr_dynamic(x):
    c = _Conf()
    for name, val in [("a", 1.0), ("b", 2.0)]:
        setattr(c, name, val)
    return x * c.a + c.b, vars(c)


@prog("getattr")
def getattr_torch_fn(x):
    out = x
    for name in ("relu", "sigmoid"):
        out = getattr(torch, name)(out)
    return out + getattr(F, "gelu")(x)


class _Holder(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer0 = fill_(nn.Linear(8, 8))
        self.layer1 = fill_(nn.Linear(8, 8), 0.2)

    def forward(self, x):
        for i in range(3):
            layer = getattr(self, f"layer{i}", None)
            if layer is not None:
                x = layer(x)
        return x


prog("getattr")(_Holder)


# =================================================================================================
# closures
# =================================================================================================
@prog("closure")
def closure_nonlocal_counter(x):
    count = 0

    def step(t):
        nonlocal count
        count += 1
        return t * 2

    y = step(step(x))
    return y, count


@prog("closure")
def closure_over_tensor(x):
    bias = x.mean(0)

    def add_bias(t):
        return t + bias

    return add_bias(x * 2)


@prog("closure")
def closure_factory(x):
    def make(scale):
        def f(t):
            return t * scale
        return f

    fs = [make(i) for i in range(1, 4)]
    return sum(f(x) for f in fs)


@prog("closure")
def closure_nonlocal_list(x):
    acc = []

    def collect(t):
        acc.append(t.sum(0))
        return t

    collect(x)
    collect(x * 2)
    return torch.stack(acc)


@prog("closure")
def closure_nonlocal_tensor(x):
    state = x

    def update():
        nonlocal state
        state = state * 0.5 + 1

    update()
    update()
    return state


# =================================================================================================
# generators
# =================================================================================================
def _gen_rows(t):
    for i in range(t.shape[0]):
        yield t[i] * i


@prog("generator")
def generator_function(x):
    return list(_gen_rows(x))


@prog("generator")
def generator_expression_sum(x):
    return sum(r.relu() for r in x)


def _gen_chain(t):
    yield t.sum(0)
    yield from _gen_rows(t)


@prog("generator")
def generator_yield_from(x):
    return torch.stack(list(_gen_chain(x[:2])))


@prog("generator")
def generator_next(x):
    g = _gen_rows(x)
    first = next(g)
    second = next(g)
    return first + second, next(g, None) is not None


@prog("generator")
def generator_send(x):
    def acc():
        total = 0
        while True:
            v = yield total
            total = total + v

    g = acc()
    next(g)
    g.send(x)
    return g.send(x * 2)


@prog("generator")
def generator_zip_enumerate(x):
    out = []
    for i, (a, b) in enumerate(zip(_gen_rows(x), x)):
        out.append(a - b * i)
    return out


# =================================================================================================
# mutation of arguments
# =================================================================================================
def _list_input():
    return ([randn(4)], randn(4))


@prog("arg_mutation", _list_input)
def arg_list_append(acc, x):
    acc.append(x * 2)
    return len(acc)


@prog("arg_mutation", xdict)
def arg_dict_set(d):
    d["c"] = d["a"] + d["b"]
    d["a"] = d["a"] * 0
    return d["c"]


@prog("arg_mutation")
def arg_tensor_inplace(x):
    x.mul_(2).add_(1)
    return x.sum()


@prog("arg_mutation", xlist)
def arg_list_of_tensors_inplace(xs):
    for t in xs:
        t.relu_()
    return xs[0] + xs[1]


@prog("arg_mutation", xlist)
def arg_list_pop_insert(xs):
    last = xs.pop()
    xs.insert(0, last * 3)
    return last


@prog("arg_mutation", xdict)
def arg_dict_pop_update(d):
    a = d.pop("a")
    d.update({"z": a * 2})
    return a + 1


@prog("arg_mutation")
def arg_tensor_setitem(x):
    x[0] = 0
    x[:, 1] += 5
    return x * 2


# =================================================================================================
# global mutation
# =================================================================================================
@prog("global_mutation")
def global_list_append(x):
    LOG.append(x.shape[0])
    return x * len(LOG)


@prog("global_mutation")
def global_dict_counter(x):
    STATE["calls"] += 1
    STATE["last_shape"] = tuple(x.shape)
    return x + STATE["calls"]


@prog("global_mutation")
def global_list_tensor(x):
    LOG.extend([x.sum(0)])
    return x * 2


@prog("global_mutation")
def global_rebind(x):
    global SCALE_G
    SCALE_G = x.shape[1] * 0.5
    return x * SCALE_G


SCALE_G = 1.0


# =================================================================================================
# super()
# =================================================================================================
class ScaledLinear(nn.Linear):
    def __init__(self):
        super().__init__(8, 4)
        fill_(self)

    def forward(self, x):
        return super().forward(x) * 2


prog("super")(ScaledLinear)


class Base(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = 2.0

    def forward(self, x):
        return x * self.k


class Mid(Base):
    def forward(self, x):
        return super().forward(x) + 1


class Leaf(Mid):
    def forward(self, x):
        return super().forward(x).relu() + super(Mid, self).forward(x)


prog("super")(Leaf)


@prog("super")
def super_in_local_class(x):
    class A:
        def f(self, t):
            return t + 1

    class B(A):
        def f(self, t):
            return super().f(t) * 2

    return B().f(x)


class WithBreak(Base):
    def forward(self, x):
        y = super().forward(x)
        print("after super", file=SINK)
        return y - 1


prog("super")(WithBreak)


# =================================================================================================
# classmethods / staticmethods
# =================================================================================================
class Scaler:
    factor = 3.0

    def __init__(self, s):
        self.s = s

    @classmethod
    def default(cls):
        return cls(cls.factor)

    @staticmethod
    def act(t):
        return t.tanh()

    def __call__(self, t):
        return self.act(t) * self.s


@prog("class_methods")
def classmethod_ctor(x):
    return Scaler.default()(x)


@prog("class_methods")
def staticmethod_call(x):
    return Scaler.act(x) + Scaler(2.0).act(x)


@prog("class_methods")
def class_attribute_read(x):
    return x * Scaler.factor + type(Scaler(1.0)).factor


class ActModule(nn.Module):
    @staticmethod
    def gate(t):
        return t.sigmoid()

    @classmethod
    def name(cls):
        return cls.__name__

    def forward(self, x):
        return self.gate(x) * len(self.name())


prog("class_methods")(ActModule)


# =================================================================================================
# properties
# =================================================================================================
class WithProps(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = fill_(nn.Linear(8, 8))
        self._temp = 2.0

    @property
    def temperature(self):
        return self._temp

    @temperature.setter
    def temperature(self, v):
        self._temp = v

    @property
    def dim(self):
        return self.lin.in_features

    def forward(self, x):
        self.temperature = 4.0
        return self.lin(x) / self.temperature + self.dim


prog("property")(WithProps)


class Box:
    def __init__(self, t):
        self._t = t

    @property
    def doubled(self):
        return self._t * 2

    @functools.cached_property
    def expensive(self):
        return self._t.exp()


@prog("property")
def property_on_object(x):
    b = Box(x)
    return b.doubled + b.expensive + b.expensive


@prog("property")
def tensor_properties(x):
    return x.T @ x, x.mT.shape, x.is_contiguous(), x.ndim, x.device.type


# =================================================================================================
# *args / **kwargs forwarding
# =================================================================================================
def _combine(a, b, *rest, alpha=1.0, **extra):
    out = a + alpha * b
    for r in rest:
        out = out + r
    if extra.get("neg"):
        out = -out
    return out


@prog("args_kwargs", x2)
def forward_args(x, y):
    args = (x, y, x * y)
    return _combine(*args)


@prog("args_kwargs", x2)
def forward_kwargs(x, y):
    kw = {"alpha": 0.5, "neg": True}
    return _combine(x, y, **kw)


def _wrapper(*args, **kwargs):
    return _combine(*args, **kwargs) * 2


@prog("args_kwargs", x2)
def forward_through_wrapper(x, y):
    return _wrapper(x, y, y, alpha=2.0)


@prog("args_kwargs", x2)
def kwonly_defaults(x, y):
    def f(a, *, b=None, c=2):
        return a * c if b is None else a + b

    return f(x), f(x, b=y), f(x, c=3)


class KwModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = fill_(nn.Linear(8, 8))

    def forward(self, x, *, mask=None, **kwargs):
        h = self.lin(x)
        if mask is not None:
            h = h * mask
        if kwargs.get("output_hidden"):
            return h, x
        return h


@prog("args_kwargs")
def module_kwargs_call(x):
    m = KwModel()
    return m(x, mask=torch.ones(8), output_hidden=True)


# =================================================================================================
# enumerate / zip / reversed
# =================================================================================================
@prog("iteration", xlist)
def enumerate_start(xs):
    out = 0
    for i, t in enumerate(xs, start=1):
        out = out + t * i
    return out


@prog("iteration", xlist)
def zip_three(xs):
    return [a * b + c for a, b, c in zip(xs, reversed(xs), [1, 2, 3])]


@prog("iteration")
def reversed_range(x):
    out = []
    for i in reversed(range(x.shape[0])):
        out.append(x[i])
    return torch.cat(out)


@prog("iteration", xdict)
def dict_items_enumerate(d):
    out = []
    for i, (k, v) in enumerate(d.items()):
        out.append(v * i + len(k))
    return out


@prog("iteration")
def zip_strict_unpack(x):
    a, b = x.chunk(2)
    pairs = list(zip(a, b))
    return torch.stack([p + q for p, q in pairs])


@prog("iteration")
def map_filter(x):
    rows = list(map(lambda r: r * 2, x))
    kept = list(filter(lambda r: r is not None, rows))
    return torch.stack(kept), any([True, False]), all(r.dim() == 1 for r in kept)


# =================================================================================================
# slicing with steps
# =================================================================================================
@prog("slicing")
def tensor_step_slice(x):
    return x[::2, 1::3]


@prog("slicing", x3d)
def tensor_ellipsis_step(x):
    return x[..., ::2] + x[..., 1::2]


@prog("slicing")
def tuple_shape_slices(x):
    lead = x.shape[:-1]
    return x.view(*lead, 2, 4), x.shape[::-1]


@prog("slicing")
def slice_objects(x):
    s = slice(1, None, 2)
    return x[s], x[:, s].shape


@prog("slicing")
def negative_index_none(x):
    return x[-1, None, :] * x[None, -2]


@prog("slicing", xlist)
def list_step_slices(xs):
    return xs[::2] + xs[-1::-2]


# =================================================================================================
# math functions on shapes
# =================================================================================================
@prog("math_shapes")
def math_sqrt_scale(x):
    return (x @ x.T) / math.sqrt(x.shape[-1])


@prog("math_shapes")
def math_ceil_pad(x):
    n = math.ceil(x.shape[1] / 3) * 3
    return F.pad(x, (0, n - x.shape[1]))


@prog("math_shapes")
def math_log2_prod(x):
    return x * math.log2(math.prod(x.shape)) + math.floor(math.log(x.numel()))


@prog("math_shapes")
def math_gcd_isclose(x):
    g = math.gcd(x.shape[0], x.shape[1])
    return x.view(g, -1), math.isclose(x.shape[0] / 3, 4 / 3)


@prog("math_shapes")
def math_pi_trig(x):
    d = x.shape[-1]
    freqs = torch.tensor([math.cos(math.pi * i / d) for i in range(d)])
    return x * freqs, math.inf > d


@prog("math_shapes")
def divmod_shapes(x):
    q, r = divmod(x.shape[1], 3)
    return x[:, : q * 3].reshape(x.shape[0], q, 3).sum(-1), r, abs(-q), pow(q, 2)


# =================================================================================================
# torch.Size arithmetic
# =================================================================================================
@prog("torch_size")
def size_concat(x):
    s = x.shape + (1,)
    return x.view(s), isinstance(s, torch.Size)


@prog("torch_size", x3d)
def size_prefix_view(x):
    new = x.shape[:-1] + (2, 4)
    return x.view(new).sum(-1)


@prog("torch_size")
def size_ctor_eq(x):
    s = torch.Size([4, 8])
    return x * (2 if x.shape == s else 3), x.size() == (4, 8), s.numel()


@prog("torch_size")
def size_product_expand(x):
    b, d = x.size()
    y = x.new_zeros(torch.Size([b * 2, d]))
    return y + x.repeat(2, 1), x.size(-1) * x.size(0)


@prog("torch_size")
def size_unpack_star(x):
    *lead, last = x.shape
    return x.reshape(-1, last).expand(2, *x.shape).contiguous(), lead


# =================================================================================================
# assorted patterns from real models
# =================================================================================================
@prog("model_patterns")
def causal_mask_attention(x):
    t, d = x.shape
    q, k, v = x, x * 0.5, x + 1
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d))
    mask = torch.tril(torch.ones(t, t, dtype=torch.bool))
    att = att.masked_fill(~mask, float("-inf")).softmax(-1)
    return att @ v


@prog("model_patterns")
def config_dict_dispatch(x):
    cfg = {"act": "gelu", "layers": 2, "norm": True}
    acts = {"relu": F.relu, "gelu": F.gelu}
    for _ in range(cfg["layers"]):
        x = acts[cfg["act"]](x)
        if cfg.get("norm", False):
            x = F.layer_norm(x, x.shape[-1:])
    return x


@prog("model_patterns")
def optional_args_none(x, mask=None, scale: Optional[float] = None):
    if mask is None:
        mask = torch.ones_like(x)
    if scale is None:
        scale = x.shape[-1] ** -0.5
    return x * mask * scale


@prog("model_patterns")
def warn_once_logging(x):
    if not STATE.get("warned"):
        STATE["warned"] = True
        LOG.append("warned")
    return x * 2


@prog("model_patterns")
def shape_check_raise(x):
    if x.dim() != 2:
        raise ValueError(f"expected 2-D input, got {x.dim()}-D")
    return x.sum(-1)


@prog("model_patterns")
def dtype_promotion_checks(x):
    if x.dtype in (torch.float16, torch.bfloat16):
        x = x.float()
    if x.is_floating_point() and not x.is_complex():
        x = x.to(torch.float64)
    return x * 2


@prog("model_patterns")
def contextmanager_user(x):
    @contextlib.contextmanager
    def tag(name):
        LOG.append("enter " + name)
        yield name
        LOG.append("exit " + name)

    with tag("block") as n:
        y = x * len(n)
    return y


class Cache:
    def __init__(self):
        self.store = {}

    def get(self, key, fn):
        if key not in self.store:
            self.store[key] = fn()
        return self.store[key]


@prog("model_patterns")
def object_cache(x):
    c = Cache()
    a = c.get("a", lambda: x * 2)
    b = c.get("a", lambda: x * 100)
    return a + b, len(c.store)


@prog("model_patterns")
def lambda_sorted_layers(x):
    layers = {"l2": 2.0, "l10": 10.0, "l1": 1.0}
    for name in sorted(layers, key=lambda n: int(n[1:])):
        x = x * layers[name] - 1
    return x


@prog("model_patterns")
def zip_params_norms(x):
    lin = fill_(nn.Linear(8, 8))
    norms = {n: p.norm() for n, p in lin.named_parameters()}
    return lin(x) + norms["weight"], sorted(norms)


@prog("model_patterns")
def einsum_rearrange(x):
    h = 2
    b, d = x.shape
    y = x.view(b, h, d // h).transpose(0, 1)
    return torch.einsum("hbd,hcd->hbc", y, y)


@prog("model_patterns")
def enum_like_constants(x):
    import enum

    class Mode(enum.Enum):
        TRAIN = 1
        EVAL = 2

    mode = Mode.EVAL
    return x * mode.value if mode is Mode.EVAL else x, mode.name


@prog("model_patterns")
def tensor_bool_python_and(x):
    flag = bool(x.shape[0] > 2) and x.is_floating_point()
    return x * int(flag), flag


@prog("model_patterns")
def cumulative_python_float(x):
    total = 0.0
    for i in range(x.shape[0]):
        total += 0.1 * i
    return x + total, round(total, 6)


@prog("model_patterns")
def tensor_tolist_to_dict(x):
    labels = ["a", "b", "c", "d"]
    scores = x.sum(1).tolist()
    best = max(zip(labels, scores), key=lambda kv: kv[1])
    return best[0], {k: round(v, 3) for k, v in zip(labels, scores)}


# =================================================================================================
# break parity: constructs Dynamo captures without breaking (numpy interop, assert, while)
# =================================================================================================
def xbig():
    return (randn(4, 8) * 100,)


@prog("numpy")
def numpy_ufunc_chain(x):
    a = x.detach().numpy()
    b = np.exp(np.tanh(a)) + np.sqrt(np.abs(a)) * 0.5
    return torch.from_numpy(np.where(np.isnan(b), 0.0, b))


@prog("numpy")
def numpy_reductions_promotion(x):
    a = x.numpy()
    col = a.sum(axis=0) / a.shape[0]
    return torch.from_numpy(a - col), a.mean(), (a > 0).sum(), (a.astype(np.float64) * np.float64(0.5)).dtype


@prog("numpy")
def numpy_int_division(x):
    i = (x * 10).to(torch.int32).numpy()
    return torch.as_tensor(i / 4 + np.clip(i, -3, 3)), i.max(axis=1)


@prog("numpy")
def numpy_concat_matmul(x):
    a = x.numpy()
    c = np.concatenate([a, a * 2], axis=0)
    return torch.from_numpy(c.T @ c), c.shape, isinstance(c, np.ndarray)


@prog("numpy")
def numpy_array_result(x):
    return x.numpy().reshape(8, 4) * 2, x.numpy().std(axis=1, ddof=1)


@prog("tensor_branch")
def branch_assert_not(x):
    LOG.append("start")
    assert not torch.isnan(x).any(), f"nan in input of shape {tuple(x.shape)}"
    LOG.append("checked")
    return x.relu()


@prog("tensor_branch", xbig)
def branch_assert_fails(x):
    LOG.append("start")
    assert x.abs().max() < 10, "input too large"
    return x * 2


@prog("tensor_branch", xbig)
def branch_while_sum(x):
    steps = 0
    while x.norm() > 1.0:
        x = x * 0.5
        steps = steps + 1
    return x, steps


@prog("getattr")
def vars_live_dict(x):
    c = _Conf()
    d = vars(c)
    c.a = 2.0
    c.b = x.sum()
    return x * c.a, d, len(d), "b" in d


@prog("try_except")
def object_sentinel_setattr(x):
    missing = object()
    v = getattr(missing, "value", None)
    try:
        missing.value = 1
    except AttributeError:
        v = 3.0
    return x * v, missing is not None


@prog("no_grad_break", xg)
def inference_mode_block(x):
    h = x.sin()
    with torch.inference_mode():
        stats = (x * 2).mean()
        flag = torch.is_inference_mode_enabled()
    return h * 2, flag


@prog("no_grad_break", xg)
def inference_mode_whole(x):
    with torch.inference_mode():
        y = torch.relu(x) + 1
        LOG.append(y.is_inference())
    return y


@prog("generator")
def generator_send_running_max(x):
    def tracker():
        best = None
        while True:
            v = yield best
            best = v if best is None else torch.maximum(best, v)

    g = tracker()
    next(g)
    for row in x:
        g.send(row)
    return g.send(x[0] * 0)
