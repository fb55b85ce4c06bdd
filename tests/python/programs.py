"""A corpus of unmodified PyTorch programs for end-to-end capture tests.

Each entry: (name, fn, make_args(dtype)). Every program must capture as one graph with no
fallback; test_programs.py runs each for float32 and float64 on fresh random inputs.
The programs cover: locals, globals, closures and cells; scalar arithmetic; tuples, lists,
dicts, slices and unpacking; attribute access; comparisons and branches on Python values;
loops over range/list/tuple/enumerate/zip/ModuleList/Sequential; user functions with defaults,
keywords, *args and **kwargs; nn.Module forward (user and built-in); torch.*, F.*, tensor
methods and operators; tensor metadata; no_grad/enable_grad.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

PROGRAMS = []
SCALE = 3.0
OFFSETS = [1.0, 2.0, 3.0]
CONFIG = {"act": "relu", "depth": 2}


def program(make_args):
    def deco(fn):
        PROGRAMS.append((fn.__name__, fn, make_args))
        return fn
    return deco


def x1(dt):
    return (torch.randn(4, 8, dtype=dt),)


def x2(dt):
    return (torch.randn(4, 8, dtype=dt), torch.randn(4, 8, dtype=dt))


def xb(dt):  # broadcastable pair
    return (torch.randn(4, 8, dtype=dt), torch.randn(8, dtype=dt))


def x3d(dt):
    return (torch.randn(2, 3, 4, dtype=dt),)


def xmm(dt):
    return (torch.randn(5, 6, dtype=dt), torch.randn(6, 3, dtype=dt))


def xpos(dt):
    return (torch.rand(4, 8, dtype=dt) + 0.1,)


# ---- operators and torch functions -----------------------------------------------------------
@program(x2)
def add(x, y): return x + y
@program(x2)
def sub(x, y): return x - y
@program(x2)
def mul(x, y): return x * y
@program(x2)
def div(x, y): return x / (y.abs() + 1)
@program(xb)
def broadcast_add(x, y): return x + y
@program(xb)
def broadcast_mul_sub(x, y): return x * y - y
@program(x1)
def scalar_ops(x): return x * 2 + 1 - 0.5
@program(x1)
def rsub(x): return 1 - x
@program(x1)
def rdiv(x): return 2 / (x.abs() + 1)
@program(xpos)
def power(x): return x ** 2 + x ** 0.5
@program(x1)
def neg(x): return -x
@program(x1)
def floordiv(x): return x // 0.3
@program(x1)
def modulo(x): return x % 0.7
@program(xmm)
def matmul_op(a, b): return a @ b
@program(xmm)
def torch_mm(a, b): return torch.mm(a, b)
@program(xmm)
def torch_matmul(a, b): return torch.matmul(a, b).relu()
@program(x2)
def compare_lt(x, y): return x < y
@program(x2)
def compare_ge(x, y): return (x >= y).float()
@program(x2)
def compare_eq(x, y): return x == y
@program(x1)
def where(x): return torch.where(x > 0, x, torch.zeros_like(x))
@program(x1)
def clamp(x): return x.clamp(-0.5, 0.5)
@program(x1)
def clamp_min(x): return torch.clamp(x, min=0.0)
@program(x1)
def abs_fn(x): return torch.abs(x) + abs(x)
@program(x1)
def exp_log(x): return torch.log(torch.exp(x) + 1)
@program(xpos)
def sqrt_rsqrt(x): return x.sqrt() + x.rsqrt()
@program(x1)
def trig(x): return torch.sin(x) * torch.cos(x) + x.tanh()
@program(x1)
def sigmoid(x): return torch.sigmoid(x) * x
@program(x1)
def masked_fill(x): return x.masked_fill(x < 0, 0.0)
@program(x1)
def cast_int(x): return (x * 10).to(torch.int64)
@program(x1)
def cast_dtype_method(x): return x.float().double().half().float()
@program(x1)
def cast_type(x): return x.type(torch.float64)
@program(x1)
def logical(x): return ((x > 0) & (x < 0.5)) | ~(x > -0.5)
@program(x1)
def bool_xor(x): return (x > 0) ^ (x > 0.3)
@program(x1)
def inplace_ops(x):
    y = x.clone()
    y.add_(1)
    y.mul_(2)
    return y
@program(x1)
def augmented_assign(x):
    y = x * 1
    y += 2
    y *= x
    y -= 1
    return y
@program(x1)
def setitem(x):
    y = x.clone()
    y[0] = 0
    y[:, 1] = 5.0
    return y
@program(x1)
def setitem_mask(x):
    y = x.clone()
    y[y < 0] = 0.0
    return y

# ---- reductions and shape ops ------------------------------------------------------------------
@program(x1)
def reductions(x): return x.sum(), x.mean(dim=1), x.amax(0), x.amin(-1, keepdim=True)
@program(x1)
def var_std(x): return x.var(dim=1), x.std(0, unbiased=False)
@program(x1)
def argmax(x): return x.argmax(dim=1), torch.argmin(x, 0)
@program(x1)
def max_with_dim(x):
    v, i = x.max(dim=1)
    return v * 2, i
@program(x1)
def max_namedtuple(x):
    r = torch.max(x, dim=0)
    return r.values + 1, r.indices
@program(x1)
def prod_any_all(x): return (x.abs() + 0.5).prod(1), (x > 0).any(), (x > -10).all(1)
@program(x1)
def softmax(x): return torch.softmax(x, dim=-1)
@program(x1)
def log_softmax(x): return F.log_softmax(x, dim=1)
@program(x1)
def cumsum(x): return x.cumsum(1)
@program(x1)
def reshape_view(x): return x.view(8, 4).reshape(2, 16).flatten()
@program(x3d)
def permute(x): return x.permute(2, 0, 1).contiguous()
@program(x3d)
def transpose(x): return x.transpose(0, 2) * 1
@program(x1)
def t_attr(x): return x.T @ x
@program(x1)
def mT_attr(x): return x.mT.sum(0)
@program(x3d)
def squeeze_unsqueeze(x): return x.unsqueeze(1).squeeze(1).unsqueeze(-1)
@program(x1)
def expand(x): return x[:, :1].expand(4, 8) + x
@program(x1)
def slicing(x): return x[1:3, ::2], x[-1], x[..., 0], x[None, :, 2]
@program(x1)
def select_index(x): return x.select(1, 3) + x[:, 3]
@program(x1)
def index_tensor(x): return x[torch.tensor([0, 2])]
@program(x2)
def cat_stack(x, y): return torch.cat([x, y], dim=0), torch.stack((x, y), 1)
@program(x1)
def split_chunk(x):
    a, b = x.split(4, dim=1)
    c, d = x.chunk(2)
    return a + b, c - d
@program(x1)
def unbind(x): return sum(x.unbind(0))
@program(x1)
def gather(x): return x.gather(1, torch.zeros(4, 2, dtype=torch.long))
@program(x1)
def index_select(x): return x.index_select(0, torch.arange(2))
@program(x1)
def repeat_tile(x): return x.repeat(2, 1), x.tile((1, 2))
@program(x1)
def flip_roll(x): return x.flip(0), x.roll(1, 1)
@program(x1)
def tril_triu(x): return x.tril(), x.triu(1)
@program(x1)
def topk(x): return x.topk(3, dim=1).values
@program(x1)
def sort(x): return torch.sort(x, dim=1)[0]
@program(x1)
def norm(x): return x.norm(dim=1), torch.linalg.vector_norm(x)
@program(x1)
def einsum(x): return torch.einsum("ij,kj->ik", x, x)

# ---- factories and metadata --------------------------------------------------------------------
@program(x1)
def factories(x):
    return x + torch.ones(4, 8, dtype=x.dtype), torch.zeros(3), torch.full((2, 2), 7.0), torch.arange(5) * 2
@program(x1)
def like_factories(x): return torch.zeros_like(x) + torch.ones_like(x) * x + torch.full_like(x, 2)
@program(x1)
def new_factories(x): return x.new_zeros(2, 3), x.new_ones((4,)) + 1, x.new_full((2,), 3.0)
@program(x1)
def eye_linspace(x): return torch.eye(4, dtype=x.dtype) @ x, torch.linspace(0, 1, 5)
@program(x1)
def tensor_literal(x): return x * torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], dtype=x.dtype)
@program(x1)
def shape_reads(x):
    n, d = x.shape
    return x.reshape(n * d) + x.size(0) + x.size()[1] + x.ndim + x.dim() + x.numel()
@program(x1)
def dtype_reads(x): return x.to(torch.float32) if x.dtype == torch.float64 else x * 2
@program(x1)
def device_reads(x): return torch.ones(2, device=x.device) + (1 if x.is_cuda else 2)
@program(x1)
def requires_grad_read(x): return x + 1 if not x.requires_grad else x
@program(x1)
def len_of_tensor(x): return x * len(x)
@program(x1)
def shape_compare(x): return x + 1 if x.shape == (4, 8) else x - 1
@program(x1)
def shape_arith(x): return x.view(-1, x.shape[-1] // 2)
@program(x1)
def is_floating(x): return x * 3 if x.is_floating_point() else x
@program(x1)
def contiguous_check(x): return x.t().contiguous() if not x.t().is_contiguous() else x

# ---- Python values: scalars, containers, unpacking, slices -------------------------------------
@program(x1)
def scalar_fold(x):
    a = 3
    b = a * 2 + 1
    c = (b - 1) / 2
    return x * c + b ** 2 - a % 2
@program(x1)
def math_module(x): return x * math.sqrt(2.0) + math.pi + math.floor(2.7)
@program(x1)
def float_int_builtins(x): return x * float(3) + int(2.9) + round(1.4) + min(1, 2) + max([3, 4])
@program(x1)
def tuple_ops(x):
    t = (1, 2, 3)
    u = t + (4,)
    return x * u[-1] + len(u) + t[1:][0]
@program(x1)
def list_ops(x):
    xs = [x, x * 2]
    xs.append(x * 3)
    xs.extend([x * 4])
    xs.insert(0, x * 0)
    last = xs.pop()
    return sum(xs) + last
@program(x1)
def list_index_assign(x):
    xs = [x, x, x]
    xs[1] = x * 5
    return xs[1] + xs[-1]
@program(x1)
def dict_ops(x):
    d = {"a": x, "b": x * 2}
    d["c"] = d["a"] + d["b"]
    d.update(e=x)
    return d["c"] + d.get("e") + d.get("missing", x) + len(d)
@program(x1)
def dict_iteration(x):
    d = {"a": 1.0, "b": 2.0}
    out = x
    for k, v in d.items():
        out = out + v
    for k in d:
        out = out * d[k]
    return out, list(d.keys()), list(d.values())
@program(x1)
def dict_comprehension(x):
    d = {i: x * i for i in range(3)}
    return d[2] + d[1]
@program(x1)
def list_comprehension(x): return torch.stack([x * i for i in range(4)])
@program(x1)
def nested_comprehension(x): return sum([x * i * j for i in range(2) for j in range(3) if j != 1])
@program(x1)
def generator_expression(x):
    a, b, c = (x * k for k in (1, 2, 3))
    return a + b + c
@program(x1)
def unpacking(x):
    a, (b, c) = x, (x * 2, x * 3)
    first, *rest = [x, x + 1, x + 2]
    return a + b + c + first + rest[-1] + len(rest)
@program(x1)
def star_unpack_call(x):
    args = (x, 2.0)
    return torch.mul(*args)
@program(x1)
def slice_objects(x):
    s = slice(1, 3)
    return x[s], [1, 2, 3, 4][s]
@program(x1)
def string_ops(x):
    name = "relu"
    key = f"{name}_{2}"
    return x.relu() if key.startswith("relu") and name.upper() == "RELU" else x
@program(x1)
def containers_returned(x): return {"out": x * 2, "aux": [x, (x + 1, 3)], "n": 5}
@program(x1)
def returns_constant_and_input(x): return x, 42, None
@program(x1)
def tuple_compare(x): return x * 2 if (1, 2) < (1, 3) else x
@program(x1)
def in_operator(x): return x * 2 if "a" in {"a": 1} and 3 in [1, 2, 3] and 5 not in (1, 2) else x
@program(x1)
def is_none_checks(x, y=None):
    if y is None:
        y = x
    return x + y
@program(x1)
def chained_compare(x): return x * 2 if 0 < 1 <= 2 < 3 else x
@program(x1)
def boolean_ops(x):
    a, b = True, False
    return x * 2 if (a and not b) or b else x
@program(x1)
def ternary(x): return x.relu() if SCALE > 2 else x.sigmoid()
@program(x1)
def isinstance_checks(x):
    out = x
    if isinstance(x, torch.Tensor):
        out = out + 1
    if isinstance(3, (int, float)) and not isinstance(x, list):
        out = out * 2
    return out
@program(x1)
def type_checks(x): return x * 2 if type(x) is torch.Tensor and type(1) is int else x
@program(x1)
def hasattr_getattr(x):
    return getattr(x, "relu")() + (1 if hasattr(x, "shape") else 0) + getattr(torch, "ones")(1)
@program(x1)
def enumerate_zip(x):
    out = x
    for i, (a, b) in enumerate(zip([1.0, 2.0], (3.0, 4.0))):
        out = out + i * a * b
    return out
@program(x1)
def reversed_sorted(x):
    out = x
    for v in reversed(sorted([3, 1, 2])):
        out = out * v
    return out
@program(x1)
def map_builtin(x): return sum(map(lambda t: t * 2, [x, x]))
@program(x1)
def while_loop(x):
    i = 0
    while i < 3:
        x = x + i
        i += 1
    return x
@program(x1)
def loop_break_continue(x):
    for i in range(10):
        if i == 1:
            continue
        if i > 3:
            break
        x = x * 1.5
    return x
@program(x1)
def nested_loops(x):
    for i in range(3):
        for j in range(2):
            x = x + i * j
    return x
@program(x1)
def for_else(x):
    for i in range(2):
        x = x + 1
    else:
        x = x * 2
    return x
@program(x1)
def loop_over_tensor(x): return sum(row * 2 for row in x)
@program(x1)
def assert_statement(x):
    assert x.dim() == 2, "need a matrix"
    return x * 2
@program(x1)
def local_import(x):
    import math as m
    from math import sqrt
    return x * m.e + sqrt(4)
@program(x1)
def del_local(x):
    y = x * 2
    del y
    return x
@program(x1)
def lambda_call(x):
    f = lambda t, k=2: t * k  # noqa: E731
    return f(x) + f(x, k=3)

# ---- globals, closures and cells ---------------------------------------------------------------
@program(x1)
def global_constant(x): return x * SCALE
@program(x1)
def global_list(x): return x + OFFSETS[1]
@program(x1)
def global_dict(x): return x.relu() if CONFIG["act"] == "relu" else x
@program(x1)
def global_function(x): return helper(x) + helper(x, scale=3.0)
@program(x1)
def global_module_attr(x): return x * math.tau


def helper(t, scale=2.0):
    return t * scale


def make_closure(k):
    def closure(x):
        return x * k + k
    return closure


closure_fn = make_closure(4.0)
PROGRAMS.append(("closure_global", closure_fn, x1))


def make_tensor_closure():
    w = torch.randn(8)

    def with_tensor(x):
        return x * w
    return with_tensor


PROGRAMS.append(("closure_tensor", make_tensor_closure(), x1))


@program(x1)
def nested_def(x):
    k = 3

    def inner(t):
        return t * k
    return inner(x) + inner(x * 2)
@program(x1)
def nonlocal_cell(x):
    total = x * 0

    def add(t):
        nonlocal total
        total = total + t
    add(x)
    add(x * 2)
    return total
@program(x1)
def closure_returning_closure(x):
    def outer(a):
        def inner(b):
            return a * b
        return inner
    return outer(2.0)(x)

# ---- calls: defaults, keywords, *args, **kwargs --------------------------------------------------


def f_defaults(x, a=1.0, b=2.0):
    return x * a + b


def f_star(*args, scale=1.0):
    return sum(args) * scale


def f_kwargs(x, **kw):
    return x * kw.get("m", 1.0) + kw["b"]


def f_kwonly(x, *, k):
    return x - k


def f_posonly(x, y, /, z=1.0):
    return x * y + z


@program(x1)
def call_defaults(x): return f_defaults(x) + f_defaults(x, 3.0) + f_defaults(x, b=5.0)
@program(x1)
def call_star_args(x): return f_star(x, x * 2, scale=0.5) + f_star(*[x, x])
@program(x1)
def call_kwargs(x): return f_kwargs(x, b=1.0) + f_kwargs(x, m=2.0, b=3.0) + f_kwargs(x, **{"b": 4.0})
@program(x1)
def call_kwonly(x): return f_kwonly(x, k=2.0)
@program(x1)
def call_posonly(x): return f_posonly(x, x) + f_posonly(x, 2.0, z=3.0)
@program(x1)
def recursion_bounded(x): return fact(x, 3)


def fact(x, n):
    return x if n == 0 else fact(x * n, n - 1)

# ---- torch.nn.functional ---------------------------------------------------------------------


@program(x1)
def f_activations(x): return F.relu(x) + F.gelu(x) + F.silu(x) + F.leaky_relu(x, 0.1) + F.elu(x) + F.softplus(x)
@program(x1)
def f_gelu_tanh(x): return F.gelu(x, approximate="tanh")
@program(x1)
def f_normalize(x): return F.normalize(x, dim=1)
@program(x1)
def f_layer_norm(x): return F.layer_norm(x, (8,))
@program(x1)
def f_linear(x): return F.linear(x, torch.ones(3, 8, dtype=x.dtype), torch.zeros(3, dtype=x.dtype))
@program(x1)
def f_dropout_eval(x): return F.dropout(x, 0.5, training=False)
@program(x1)
def f_pad(x): return F.pad(x, (1, 1))
@program(x1)
def f_mse(x): return F.mse_loss(x, torch.zeros_like(x))
@program(x1)
def f_cross_entropy(x): return F.cross_entropy(x, torch.tensor([0, 1, 2, 3]))
@program(x1)
def f_hardtanh_relu6(x): return F.hardtanh(x) + F.relu6(x * 6)
@program(x1)
def f_one_hot(x): return F.one_hot(torch.tensor([0, 2, 1]), 4).to(x.dtype) @ x[:4]
@program(lambda dt: (torch.randn(1, 2, 8, 8, dtype=dt),))
def f_conv_pool(x):
    w = torch.ones(3, 2, 3, 3, dtype=x.dtype) * 0.1
    y = F.conv2d(x, w, padding=1)
    return F.max_pool2d(y, 2), F.avg_pool2d(y, 2), F.adaptive_avg_pool2d(y, 1)
@program(lambda dt: (torch.randn(2, 4, 6, dtype=dt),))
def f_sdpa(x): return F.scaled_dot_product_attention(x, x, x, is_causal=True)
@program(lambda dt: (torch.randint(0, 10, (3, 4)),))
def f_embedding(idx): return F.embedding(idx, torch.arange(40.0).view(10, 4))

# ---- grad mode ---------------------------------------------------------------------------------


@program(lambda dt: (torch.randn(4, 8, dtype=dt, requires_grad=True),))
def no_grad_block(x):
    with torch.no_grad():
        y = x * 2
    return y + 1, x * 3
@program(lambda dt: (torch.randn(4, 8, dtype=dt, requires_grad=True),))
def enable_grad_inside_no_grad(x):
    with torch.no_grad():
        a = x * 2
        with torch.enable_grad():
            b = x * 3
    return a, b
@program(lambda dt: (torch.randn(4, 8, dtype=dt, requires_grad=True),))
def requires_grad_input(x): return (x * x).sum(1)

# ---- nn.Module ---------------------------------------------------------------------------------


class MLP(nn.Module):
    def __init__(self, d=8, h=16):
        super().__init__()
        self.fc1 = nn.Linear(d, h)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(h, d)
        self.scale = 0.5

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x))) * self.scale + x


class WithBuffers(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.zeros(8))
        self.weight = nn.Parameter(torch.ones(8))

    def forward(self, x):
        return (x - self.mean) * self.weight


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(8, 8) for _ in range(3)])
        self.seq = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.LayerNorm(8))
        self.heads = nn.ModuleDict({"a": nn.Linear(8, 2), "b": nn.Linear(8, 3)})

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x) + i
        x = self.seq(x) + self.layers[-1](x) + self.seq[0](x)
        return {k: head(x) for k, head in self.heads.items()}


class Branchy(nn.Module):
    def __init__(self, use_norm):
        super().__init__()
        self.use_norm = use_norm
        self.norm = nn.LayerNorm(8) if use_norm else None
        self.proj = nn.Linear(8, 8, bias=False)

    def helper(self, x):
        return self.proj(x)

    @property
    def factor(self):
        return 2.0

    def forward(self, x):
        if self.norm is not None:
            x = self.norm(x)
        if self.training:
            x = x * 1.0
        return self.helper(x) * self.factor


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(4 * 4 * 4, 5)

    def forward(self, x):
        x = self.pool(F.relu(self.bn(self.conv(x))))
        return self.fc(torch.flatten(x, 1))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True)
        self.ln = nn.LayerNorm(8)

    def forward(self, x):
        return self.ln(x + x.softmax(-1))


def _module_program(name, make_module, make_args):
    mod = make_module()

    def run(*args):
        return mod(*args)
    run.__name__ = name
    run.module = mod
    PROGRAMS.append((name, run, make_args))


_module_program("module_mlp", lambda: MLP().eval(), x1)
_module_program("module_buffers", WithBuffers, x1)
_module_program("module_containers", lambda: Stack().eval(), x1)
_module_program("module_branch_norm", lambda: Branchy(True).eval(), x1)
_module_program("module_branch_plain", lambda: Branchy(False).train(), x1)
_module_program("module_conv_bn_eval", lambda: ConvNet().eval(), lambda dt: (torch.randn(2, 2, 8, 8),))
_module_program("module_block", lambda: Block().eval(), lambda dt: (torch.randn(2, 3, 8),))
_module_program("module_builtin_sequential", lambda: nn.Sequential(nn.Linear(8, 4), nn.Tanh(), nn.Linear(4, 2)), x1)
_module_program("module_embedding_ln", lambda: nn.Sequential(nn.Embedding(10, 8), nn.LayerNorm(8), nn.Dropout(0.0)),
                lambda dt: (torch.randint(0, 10, (2, 5)),))
_module_program("module_softmax", lambda: nn.Softmax(dim=1), x1)
_module_program("module_identity_flatten", lambda: nn.Sequential(nn.Identity(), nn.Flatten(0)), x1)
_module_program("module_groupnorm", lambda: nn.GroupNorm(2, 4), lambda dt: (torch.randn(2, 4, 3, 3),))
_module_program("module_conv1d", lambda: nn.Conv1d(3, 2, 2), lambda dt: (torch.randn(1, 3, 10),))
