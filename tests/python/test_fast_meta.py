"""Shape propagation of common elementwise operators in C++ (csrc/python/meta/fast_meta.cpp) gives
exactly what PyTorch's own meta kernels give (sizes, strides, dtype), takes the Python path for
anything else, and keeps a first capture of `(x * 2).relu()` from importing sympy."""
import operator
import subprocess
import sys

import pytest
import torch

import kiln
from kiln import _C

M = "meta"


def meta(shape, dtype=torch.float32, layout="contiguous"):
    if layout == "transposed":  # the last two dimensions swapped
        if len(shape) < 2:
            return torch.empty(shape, device=M, dtype=dtype)
        return torch.empty(shape[:-2] + shape[-2:][::-1], device=M, dtype=dtype).transpose(-1, -2)
    if layout == "channels_last":
        return torch.empty(shape, device=M, dtype=dtype).to(memory_format=torch.channels_last)
    if layout == "sliced":
        return torch.empty(shape[:-1] + (shape[-1] * 2,), device=M, dtype=dtype)[..., ::2]
    return torch.empty(shape, device=M, dtype=dtype)


def same(a, b):
    assert a.device == b.device and a.dtype == b.dtype and a.shape == b.shape and a.stride() == b.stride(), (a, b, a.stride(), b.stride())
    assert a.requires_grad == b.requires_grad and a.is_leaf == b.is_leaf, (a, b)


OPERANDS = [
    ("f32", lambda: meta((4, 6))),
    ("f32_t", lambda: meta((4, 6), layout="transposed")),
    ("bf16", lambda: meta((4, 6), torch.bfloat16)),
    ("f16_row", lambda: meta((6,), torch.float16)),
    ("i64", lambda: meta((4, 6), torch.int64)),
    ("i32_col", lambda: meta((4, 1), torch.int32)),
    ("bool", lambda: meta((4, 6), torch.bool)),
    ("f64_0d", lambda: meta((), torch.float64)),
    ("nchw_cl", lambda: meta((2, 3, 4, 5), layout="channels_last")),
    ("sliced", lambda: meta((4, 6), layout="sliced")),
]
NUMBERS = [2, -3, 2.5, True]
BINARY_FN = [operator.add, operator.sub, operator.mul, operator.truediv, operator.eq, operator.lt, operator.ge,
             torch.add, torch.mul, torch.sub, torch.div, torch.maximum, torch.gt]
BINARY_METHODS = ["add", "__add__", "__radd__", "sub", "__rsub__", "mul", "__rmul__", "div", "__truediv__", "ne", "__le__", "__gt__"]
UNARY = ["neg", "relu", "exp", "sigmoid", "tanh", "rsqrt", "sqrt", "log", "sin", "cos", "erf"]


def python_call(target, method, args, kwargs):
    if method:
        return getattr(args[0], method)(*args[1:], **kwargs)
    return target(*args, **kwargs)


def check(target, method, args, kwargs=None):
    kwargs = kwargs or {}
    try:
        ref = python_call(target, method, args, kwargs)
    except Exception:
        ref = None
    got = _C._fast_meta(target, method, tuple(args), kwargs)
    if got is None:
        return False
    assert ref is not None and ref is not NotImplemented, (target, method, args, "C++ handled a call Python refuses")
    same(got, ref)
    return True


def assert_fresh_process_prints_false(code):
    """Runs `code` in a new interpreter (sympy not yet imported); its last line must be False."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "False", out.stdout


def test_binary_matches_python_meta_kernels():
    handled = 0
    for _, a in OPERANDS:
        for _, b in OPERANDS:
            for f in BINARY_FN:
                handled += check(f, "", (a(), b()))
            for m in BINARY_METHODS:
                handled += check(None, m, (a(), b()))
        for n in NUMBERS:
            for f in BINARY_FN:
                handled += check(f, "", (a(), n))
                handled += check(f, "", (n, a()))
            for m in BINARY_METHODS:
                handled += check(None, m, (a(), n))
    assert handled > 500


def test_unary_and_kwargs_match():
    for _, a in OPERANDS:
        for m in UNARY:
            check(None, m, (a(),))
            check(getattr(torch, m), "", (a(),))
        check(torch._C._nn.gelu, "", (a(),), {"approximate": "tanh"})
        check(torch._C._nn.gelu, "", (a(),))
        check(torch._C._nn.silu, "", (a(),))
        check(torch.add, "", (a(), a()), {"alpha": 2})
    assert check(None, "relu", (meta((3, 5)),))
    assert check(torch._C._nn.gelu, "", (meta((3, 5)),), {"approximate": "tanh"})


def test_python_path_for_the_rest():
    x = meta((4, 6))
    assert _C._fast_meta(torch.div, "", (x, x), {"rounding_mode": "floor"}) is None
    assert _C._fast_meta(torch.sub, "", (2, x), {}) is None  # torch.sub(2, x) raises in Python
    assert _C._fast_meta(torch.maximum, "", (x, 2), {}) is None
    assert _C._fast_meta(operator.mul, "", (x, torch.empty(4, 6)), {}) is None  # a CPU tensor
    assert _C._fast_meta(torch.cumsum, "", (x, 0), {}) is None


def test_operands_that_require_grad():
    """Training captures: a result of operands that require grad requires grad and is no leaf, as
    PyTorch's (its autograd node is one the capture never runs); comparisons, integer results and
    grad mode off give plain tensors, as PyTorch does."""
    g = torch.empty(4, 6, device=M, requires_grad=True)
    x = meta((4, 6))
    w = torch.empty(8, 6, device=M, requires_grad=True)
    assert check(operator.mul, "", (g, 2))
    assert check(operator.add, "", (x, g))
    assert check(operator.lt, "", (g, x))  # bool: no grad
    assert check(None, "relu", (g,))
    assert check(torch._C._nn.linear, "", (g, w))
    assert check(F.layer_norm, "", (g, (6,)))
    assert check(F.softmax, "", (g, -1))
    assert check(F.embedding, "", (meta((3,), torch.int64), w))
    assert check(torch.sum, "", (g,), {"dim": 1})
    assert check(None, "square", (g,)) and check(torch.square, "", (x,))
    assert check(None, "mean", (g,))
    with torch.no_grad():
        assert check(operator.mul, "", (g, 2))
        assert not _C._fast_meta(operator.mul, "", (g, 2), {}).requires_grad
    r = _C._fast_meta(operator.mul, "", (g, 2), {})
    assert r.requires_grad and not r.is_leaf and r.grad_fn is not None
    assert _C._fast_meta(None, "to", (g, torch.float32), {}) is g and g.is_leaf  # the tensor itself, untouched


def test_first_training_capture_imports_no_sympy():
    """A training step's capture (parameters require grad) takes the C++ meta functions too."""
    code = ("import sys, torch, kiln\n"
            "m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 16), torch.nn.LayerNorm(16))\n"
            "ref = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 16), torch.nn.LayerNorm(16))\n"
            "ref.load_state_dict(m.state_dict())\n"
            "x = torch.randn(8, 16)\n"
            "loss = kiln.compile(m)(x).square().mean()\n"
            "loss.backward()\n"
            "imported = 'sympy' in sys.modules\n"
            "ref(x).square().mean().backward()\n"
            "for p, q in zip(m.parameters(), ref.parameters()):\n"
            "    torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5)\n"
            "print(imported)\n")
    assert_fresh_process_prints_false(code)


def test_first_capture_imports_no_sympy():
    code = ("import sys, torch, kiln\n"
            "f = kiln.compile(lambda t: (t * 2).relu() - 1)\n"
            "x = torch.randn(8, 8)\n"
            "y = f(x)\n"
            "imported = 'sympy' in sys.modules\n"
            "torch.testing.assert_close(y, (x * 2).relu() - 1)\n"
            "assert kiln.stats()['graphs'] == 1, kiln.stats()\n"
            "print(imported)\n")
    assert_fresh_process_prints_false(code)


# ---- composite operators (softmax, layer norm, embedding, linear, matmul, reductions...) --------

import torch.nn.functional as F  # noqa: E402

FLOATS = [torch.float32, torch.bfloat16, torch.float16, torch.float64]


def layouts(shape, dtype=torch.float32):
    out = [meta(shape, dtype)]
    if len(shape) >= 2:
        out.append(meta(shape, dtype, "transposed"))
        out.append(meta(shape, dtype, "sliced"))
    if len(shape) == 4:
        out.append(meta(shape, dtype, "channels_last"))
    return out


def check_all(calls):
    handled = 0
    for target, method, args, kwargs in calls:
        handled += check(target, method, args, kwargs)
    return handled


def test_softmax_layer_norm_embedding_match():
    calls = []
    for dt in FLOATS + [torch.int64]:
        for x in layouts((3, 5), dt) + layouts((2, 3, 4, 5), dt) + [meta((), dt), meta((7,), dt)]:
            for dim in (-1, 0, 1, 5):
                calls += [(F.softmax, "", (x, dim), {}), (F.log_softmax, "", (x,), {"dim": dim}),
                          (torch.softmax, "", (x, dim), {}), (None, "softmax", (x, dim), {}),
                          (None, "log_softmax", (x,), {"dim": dim, "dtype": torch.float32}),
                          (F.softmax, "", (x, dim), {"dtype": torch.float64}), (F.softmax, "", (x, dim, 3), {})]
            n = x.shape[-1:] if x.dim() else (1,)
            for w in (None, meta(tuple(n), dt), meta(tuple(n), torch.float32), meta((9,), dt)):
                for b in (None, meta(tuple(n), dt)):
                    calls += [(F.layer_norm, "", (x, tuple(n), w, b), {}), (F.layer_norm, "", (x, list(n)), {"weight": w, "bias": b, "eps": 1e-6}),
                              (torch.layer_norm, "", (x, list(n), w, b, 1e-5, True), {})]
            if x.dim() >= 2:
                calls.append((F.layer_norm, "", (x, tuple(x.shape[-2:])), {}))
    for idx in (meta((4, 6), torch.int64), meta((5,), torch.int32), meta((4, 6), torch.int64, "transposed"), meta((3,), torch.float32)):
        for w in (meta((10, 8)), meta((10, 8), torch.bfloat16), meta((10, 8), layout="transposed"), meta((10,))):
            calls += [(F.embedding, "", (idx, w), {}), (F.embedding, "", (idx, w, 2), {}), (F.embedding, "", (idx, w), {"padding_idx": -3}),
                      (torch.embedding, "", (w, idx), {}), (torch.embedding, "", (w, idx, -1, False, False), {})]
    assert check_all(calls) > 400


def test_matmul_linear_attention_match():
    calls = []
    shapes = [(5,), (3, 5), (2, 3, 5), (4, 2, 3, 5), (1, 3, 5)]
    rshapes = [(5,), (5, 7), (2, 5, 7), (4, 1, 5, 7), (1, 5, 7), (6, 7)]
    for dt in (torch.float32, torch.bfloat16):
        for sa in shapes:
            for sb in rshapes:
                for a in layouts(sa, dt):
                    for b in layouts(sb, dt)[:2]:
                        calls += [(torch.matmul, "", (a, b), {}), (operator.matmul, "", (a, b), {}), (None, "__matmul__", (a, b), {}),
                                  (None, "matmul", (a, b), {})]
            for w in (meta((7, 5), dt), meta((7, 5), dt, "transposed"), meta((7, 4), dt)):
                for bias in (None, meta((7,), dt), meta((7,), torch.float32), meta((1,), dt)):
                    for a in layouts(sa, dt):
                        calls += [(F.linear, "", (a, w, bias), {}), (F.linear, "", (a, w), {"bias": bias})]
        m1, m2, b3 = meta((3, 5), dt), meta((5, 7), dt), meta((2, 3, 5), dt)
        for bias in (meta((3, 7), dt), meta((7,), dt), meta((3, 7), dt, "transposed")):
            calls += [(torch.addmm, "", (bias, m1, m2), {}), (torch.addmm, "", (bias, m1, m2), {"beta": 0.5, "alpha": 2}),
                      (None, "addmm", (bias, m1, m2), {})]
        calls += [(torch.mm, "", (m1, m2), {}), (None, "mm", (m1, m2), {}), (torch.mm, "", (m2, m1), {}),
                  (torch.bmm, "", (b3, meta((2, 5, 7), dt)), {}), (None, "bmm", (b3, meta((2, 5, 7), dt, "transposed")), {}),
                  (torch.baddbmm, "", (meta((2, 3, 7), dt), b3, meta((2, 5, 7), dt)), {"alpha": 2}),
                  (torch.mm, "", (m1, meta((5, 7), torch.float32 if dt != torch.float32 else torch.float64)), {})]
        for q in layouts((2, 4, 6, 8), dt)[:2] + [meta((2, 6, 4, 8), dt).transpose(1, 2), meta((3, 6, 8), dt)]:
            k = meta(tuple(q.shape[:-2]) + (5, 8), dt)
            v = meta(tuple(q.shape[:-2]) + (5, 3), dt)
            for mask in (None, meta((6, 5), torch.bool), meta((1, 1, 6, 5), dt), meta(tuple(q.shape[:-2]) + (6, 5), dt), meta((6, 4), torch.bool)):
                calls += [(F.scaled_dot_product_attention, "", (q, k, v, mask), {}),
                          (F.scaled_dot_product_attention, "", (q, k, v), {"attn_mask": mask, "scale": 0.3}),
                          (F.scaled_dot_product_attention, "", (q, k, v, mask, 0.0, mask is None), {})]
            calls += [(F.scaled_dot_product_attention, "", (q, q, q), {"is_causal": True}),
                      (F.scaled_dot_product_attention, "", (q, k, meta(tuple(q.shape[:-2]) + (4, 3), dt)), {})]
    assert check_all(calls) > 300


def test_reductions_and_misc_match():
    calls = []
    for dt in (torch.float32, torch.bfloat16, torch.int64, torch.bool):
        for x in layouts((3, 5), dt) + layouts((2, 3, 4, 5), dt) + [meta((), dt)]:
            for f in ("sum", "mean", "amax", "amin"):
                calls += [(getattr(torch, f), "", (x,), {}), (None, f, (x, -1), {}), (None, f, (x,), {"dim": (0, -1), "keepdim": True}),
                          (getattr(torch, f), "", (x, [1], True), {}), (None, f, (x, 1), {"keepdim": False})]
            calls += [(torch.sum, "", (x,), {"dtype": torch.float64}), (None, "mean", (x, -1, True), {"dtype": torch.float32}),
                      (None, "sum", (x, None), {})]
            for d in (0, 1, -1):
                calls += [(torch.tril, "", (x, d), {}), (None, "triu", (x,), {"diagonal": d}), (None, "tril", (x,), {})]
            for mask in (meta(tuple(x.shape), torch.bool), meta(tuple(x.shape[-1:]), torch.bool), meta((1, 1), torch.bool)):
                for v in (float("-inf"), 0, True, 2.5):
                    calls += [(None, "masked_fill", (x, mask, v), {}), (torch.masked_fill, "", (x, mask, v), {})]
            calls += [(operator.invert, "", (x,), {}), (None, "__invert__", (x,), {}), (torch.bitwise_not, "", (x,), {})]
            for e in (2, 0.5, -1, True, meta(tuple(x.shape), torch.float32)):
                calls += [(operator.pow, "", (x, e), {}), (None, "__pow__", (x, e), {}), (torch.pow, "", (x, e), {})]
            for t in (torch.float32, torch.bfloat16, torch.int32, dt):
                calls += [(None, "to", (x, t), {}), (None, "to", (x,), {"dtype": t}), (None, "type_as", (x, meta((1,), t)), {})]
            calls += [(None, "float", (x,), {}), (None, "half", (x,), {}), (None, "bfloat16", (x,), {})]
            for y in (meta(tuple(x.shape), torch.bool), meta(tuple(x.shape), torch.int64)):
                calls += [(operator.and_, "", (x, y), {}), (None, "__or__", (x, y), {}), (torch.bitwise_xor, "", (x, y), {}),
                          (operator.and_, "", (x, True), {}), (operator.or_, "", (3, x), {})]
    assert check_all(calls) > 700


def test_cast_to_same_dtype_is_the_tensor():
    x = meta((3, 4))
    assert _C._fast_meta(None, "to", (x, torch.float32), {}) is x
    assert _C._fast_meta(None, "float", (x,), {}) is x


def test_parameters_under_no_grad():
    w = torch.empty(7, 5, device=M, requires_grad=True)
    x = meta((3, 5))
    same(_C._fast_meta(F.linear, "", (x, w), {}), F.linear(x, w))  # requires grad, as autograd's
    with torch.no_grad():
        got = _C._fast_meta(F.linear, "", (x, w), {})
        ref = F.linear(x, w)
        same(got, ref)
        assert not got.requires_grad and not ref.requires_grad


def test_composite_python_path_for_the_rest():
    x = meta((4, 6))
    assert _C._fast_meta(F.softmax, "", (x,), {}) is None  # no dim: F.softmax warns and picks one
    assert _C._fast_meta(F.embedding, "", (meta((3,), torch.int64), meta((5, 2))), {"max_norm": 1.0}) is None
    assert _C._fast_meta(F.embedding, "", (meta((3,), torch.int64), meta((5, 2)), 5), {}) is None  # F.embedding asserts
    assert _C._fast_meta(torch.matmul, "", (meta((3, 5)), meta((2, 5, 7))), {}) is None  # a transposed view
    assert _C._fast_meta(F.softmax, "", (x, 0), {"bogus": 1}) is None
    assert _C._fast_meta(operator.matmul, "", (x,), {"other": x.t()}) is None


def test_first_capture_of_a_transformer_imports_no_sympy():
    code = ("import sys, math, torch, kiln\n"
            "import torch.nn as nn, torch.nn.functional as F\n"
            "class M(nn.Module):\n"
            "    def __init__(self):\n"
            "        super().__init__()\n"
            "        self.emb, self.ln, self.fc, self.out = nn.Embedding(50, 16), nn.LayerNorm(16), nn.Linear(16, 48), nn.Linear(16, 16)\n"
            "    def forward(self, idx):\n"
            "        x = self.emb(idx)\n"
            "        q, k, v = self.fc(self.ln(x)).split(16, dim=-1)\n"
            "        t = idx.shape[1]\n"
            "        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(16))\n"
            "        mask = torch.ones(t, t, dtype=torch.bool).tril()\n"
            "        att = att.masked_fill(~mask, float('-inf')).softmax(dim=-1)\n"
            "        y = self.out(att @ v) + F.scaled_dot_product_attention(q, k, v, is_causal=True)\n"
            "        return F.log_softmax(y, -1).mean(-1)\n"
            "m = M().eval()\n"
            "f = kiln.compile(m)\n"
            "idx = torch.randint(0, 50, (2, 8))\n"
            "with torch.no_grad():\n"
            "    y = f(idx)\n"
            "    imported = 'sympy' in sys.modules\n"
            "    torch.testing.assert_close(y, m(idx), rtol=1e-4, atol=1e-5)\n"
            "assert kiln.stats()['graphs'] == 1, kiln.stats()\n"
            "print(imported)\n")
    assert_fresh_process_prints_false(code)


def test_arange_on_the_meta_device_matches():
    calls = []
    for args in ((5,), (0,), (2, 9), (9, 2), (2, 9, 3), (9, 2, -3), (3, 3), (2, 10, 0), (1, 2.5), (-4, 7, 2)):
        for kw in ({}, {"dtype": torch.float32}, {"dtype": torch.int32}, {"dtype": torch.bfloat16}, {"requires_grad": False}):
            calls.append((torch.arange, "", args, dict(kw, device=torch.device(M))))
    assert check_all(calls) > 30
    assert _C._fast_meta(torch.arange, "", (5,), {}) is None  # a CPU tensor
    assert _C._fast_meta(torch.arange, "", (5,), {"device": torch.device(M), "requires_grad": True}) is None


def test_softmax_stacklevel_is_not_the_dim():
    x = meta((4, 6))
    got = _C._fast_meta(F.softmax, "", (x, 0), {"_stacklevel": 5})
    same(got, F.softmax(x, 0, _stacklevel=5))


# ---- convolution networks (conv2d, batch_norm, max_pool2d, adaptive_avg_pool2d, F.relu/F.silu) --

def test_conv_pool_batch_norm_match():
    calls = []
    for dt in (torch.float32, torch.bfloat16, torch.float16):
        for x in layouts((2, 6, 9, 8), dt):
            for w, kw in ((meta((4, 6, 3, 3), dt), {}), (meta((4, 6, 3, 3), dt), {"stride": 2, "padding": 1}),
                          (meta((6, 2, 3, 1), dt), {"groups": 3, "padding": (1, 0), "dilation": (2, 1)}),
                          (meta((4, 6, 1, 1), dt), {"stride": (2,)}), (meta((4, 6, 7, 7), dt), {"padding": [3, 3], "stride": [2, 2]}),
                          (meta((4, 3, 3, 3), dt), {}), (meta((4, 6, 11, 3), dt), {}), (meta((4, 6, 3, 3), torch.float64), {}),
                          (meta((4, 6, 3, 3), dt, "channels_last"), {})):
                calls += [(torch.conv2d, "", (x, w), kw), (F.conv2d, "", (x, w, meta((w.shape[0],), dt)), kw),
                          (torch.conv2d, "", (x, w, meta((5,), dt)), kw)]
            for k, kw in ((3, {"stride": 2, "padding": 1}), (2, {}), ((3, 2), {"stride": (1, 2)}), (3, {"padding": 2}),
                          (2, {"dilation": 2, "stride": []}), (3, {"ceil_mode": True}), (20, {})):
                calls.append((F.max_pool2d, "", (x, k), kw))
            for size in (1, (1, 1), [1, 1], 2):
                calls.append((F.adaptive_avg_pool2d, "", (x, size), {}))
            c = meta((6,), dt)
            for kw in ({}, {"training": False, "eps": 1e-3}, {"momentum": 0.2}):
                calls += [(F.batch_norm, "", (x, c, c, c, c), kw), (F.batch_norm, "", (x, c, c), kw),
                          (F.batch_norm, "", (x, c, c), dict(kw, weight=c, bias=meta((5,), dt)))]
            for f in (F.relu, F.silu):
                calls += [(f, "", (x,), {}), (f, "", (x,), {"inplace": False})]
    for x in (meta((3, 4), torch.int64), meta((3, 4), torch.bool), meta((2, 3), torch.float64)):
        calls += [(F.relu, "", (x,), {}), (F.silu, "", (x,), {})]
    assert check_all(calls) > 100


def test_conv_pool_batch_norm_python_path_for_the_rest():
    x, w, c = meta((2, 6, 9, 8)), meta((4, 6, 3, 3)), meta((6,))
    assert _C._fast_meta(torch.conv2d, "", (x, w), {"padding": "same"}) is None
    assert _C._fast_meta(torch.conv2d, "", (meta((6, 9, 8)), w), {}) is None  # unbatched
    assert _C._fast_meta(torch.conv2d, "", (meta((2, 6, 9, 8), layout="channels_last"), w), {}) is None
    assert _C._fast_meta(F.batch_norm, "", (x, c, c), {"training": True}) is None  # writes the running statistics
    assert _C._fast_meta(F.max_pool2d, "", (x, 3), {"return_indices": True}) is None
    assert _C._fast_meta(F.relu, "", (x,), {"inplace": True}) is None
    assert _C._fast_meta(F.adaptive_avg_pool2d, "", (x, (2, 2)), {}) is None


def test_first_capture_of_a_cnn_imports_no_sympy():
    code = ("import sys, torch, kiln\n"
            "import torch.nn as nn, torch.nn.functional as F\n"
            "class M(nn.Module):\n"
            "    def __init__(self):\n"
            "        super().__init__()\n"
            "        self.stem = nn.Sequential(nn.Conv2d(3, 8, 7, 2, 3, bias=False), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(3, 2, 1))\n"
            "        self.c = nn.Conv2d(8, 8, 3, 1, 1)\n"
            "        self.bn = nn.BatchNorm2d(8)\n"
            "        self.fc = nn.Linear(8, 5)\n"
            "    def forward(self, x):\n"
            "        x = self.stem(x)\n"
            "        x = F.relu(self.bn(self.c(x)) + x)\n"
            "        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))\n"
            "m = M().eval()\n"
            "f = kiln.compile(m)\n"
            "x = torch.randn(2, 3, 32, 32)\n"
            "with torch.no_grad():\n"
            "    y = f(x)\n"
            "    imported = 'sympy' in sys.modules\n"
            "    torch.testing.assert_close(y, m(x), rtol=1e-4, atol=1e-5)\n"
            "assert kiln.stats()['graphs'] == 1, kiln.stats()\n"
            "print(imported)\n")
    assert_fresh_process_prints_false(code)


def test_cat_matches_python_meta_kernels():
    a, b = meta((2, 4, 5, 8)), meta((2, 4, 1, 8))
    for args, kwargs in [(([a, b], 2), {}), (([a, b],), {"dim": -2}), (((a, a),), {}), (([meta((3, 4)), meta((3, 4), torch.int64)], 1), {}),
                         (([meta((0,)), meta((3, 4), torch.bfloat16)], 0), {}),
                         (([meta((2, 3, 4, 5), layout="channels_last"), meta((2, 3, 4, 5), layout="channels_last")], 1), {}),
                         (([meta((4, 6), layout="transposed"), meta((4, 6))], 0), {})]:
        for fn in (torch.cat, torch.concat, torch.concatenate):
            assert check(fn, "", list(args), kwargs), (fn, args)
    assert not check(torch.cat, "", [[a, 3]], {})  # not all tensors: the Python path


def test_first_capture_of_a_kv_cache_step_imports_no_sympy():
    # torch.cat's Python meta kernel imports sympy: 2.6 s of a decoder step's first call on a
    # fresh GPU machine.
    code = ("import sys, torch, kiln\n"
            "def step(q, k_cache, v_cache, k, v):\n"
            "    k, v = torch.cat([k_cache, k], dim=2), torch.cat([v_cache, v], dim=2)\n"
            "    return (q @ k.transpose(-2, -1)).softmax(-1) @ v, k, v\n"
            "args = [torch.randn(2, 4, 1, 8), torch.randn(2, 4, 6, 8), torch.randn(2, 4, 6, 8), torch.randn(2, 4, 1, 8), torch.randn(2, 4, 1, 8)]\n"
            "f = kiln.compile(step)\n"
            "with torch.no_grad():\n"
            "    y = f(*args)\n"
            "imported = 'sympy' in sys.modules\n"
            "for a, b in zip(y, step(*args)): torch.testing.assert_close(a, b)\n"
            "print(imported)\n")
    assert_fresh_process_prints_false(code)
