"""Shape propagation of common elementwise operators in C++ (csrc/python/fast_meta.cpp) gives
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
    if layout == "transposed":
        return torch.empty(shape[::-1], device=M, dtype=dtype).t()
    if layout == "channels_last":
        return torch.empty(shape, device=M, dtype=dtype).to(memory_format=torch.channels_last)
    if layout == "sliced":
        return torch.empty(shape[:-1] + (shape[-1] * 2,), device=M, dtype=dtype)[..., ::2]
    return torch.empty(shape, device=M, dtype=dtype)


def same(a, b):
    assert a.device == b.device and a.dtype == b.dtype and a.shape == b.shape and a.stride() == b.stride(), (a, b, a.stride(), b.stride())


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
    g = torch.empty(4, 6, device=M, requires_grad=True)
    assert _C._fast_meta(operator.mul, "", (g, 2), {}) is None  # autograd
    assert _C._fast_meta(torch.matmul, "", (x, x.t()), {}) is None


def test_first_capture_imports_no_sympy():
    code = ("import sys, torch, kiln\n"
            "f = kiln.compile(lambda t: (t * 2).relu() - 1)\n"
            "x = torch.randn(8, 8)\n"
            "y = f(x)\n"
            "imported = 'sympy' in sys.modules\n"
            "torch.testing.assert_close(y, (x * 2).relu() - 1)\n"
            "assert kiln.stats()['graphs'] == 1, kiln.stats()\n"
            "print(imported)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "False", out.stdout
