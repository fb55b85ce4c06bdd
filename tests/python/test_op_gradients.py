"""Every operator family kiln lowers to generated kernels (docs/core_ops.md), differentiated through
kiln's autograd layer: the joint graph holds PyTorch's own backward formulas, both halves are
generated code, and the loss and every input gradient match eager."""
import pytest
import torch
import torch.nn.functional as F

import kiln
from kiln import _codegen
from conftest import assert_same

POS = lambda *s: (torch.rand(*s) + 0.5)  # noqa: E731  (inputs where log/sqrt/pow are defined)
ANY = lambda *s: torch.randn(*s)  # noqa: E731
UNIT = lambda *s: torch.rand(*s) * 1.8 - 0.9  # noqa: E731  (asin/acos domain)

UNARY = {
    "abs": (torch.abs, ANY), "neg": (torch.neg, ANY), "exp": (torch.exp, ANY), "exp2": (torch.exp2, ANY),
    "expm1": (torch.expm1, ANY), "log": (torch.log, POS), "log2": (torch.log2, POS), "log10": (torch.log10, POS),
    "log1p": (torch.log1p, POS), "sqrt": (torch.sqrt, POS), "rsqrt": (torch.rsqrt, POS), "sin": (torch.sin, ANY),
    "cos": (torch.cos, ANY), "tan": (torch.tan, UNIT), "tanh": (torch.tanh, ANY), "sigmoid": (torch.sigmoid, ANY),
    "relu": (torch.relu, ANY), "erf": (torch.erf, ANY), "erfc": (torch.erfc, ANY), "reciprocal": (torch.reciprocal, POS),
    "silu": (F.silu, ANY), "asin": (torch.asin, UNIT), "acos": (torch.acos, UNIT), "atan": (torch.atan, ANY),
    "sinh": (torch.sinh, ANY), "cosh": (torch.cosh, ANY), "hardswish": (F.hardswish, ANY),
    "hardsigmoid": (F.hardsigmoid, ANY), "mish": (F.mish, ANY), "square": (torch.square, ANY),
    "gelu": (F.gelu, ANY), "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), ANY), "leaky_relu": (F.leaky_relu, ANY),
    "elu": (F.elu, ANY), "softplus": (F.softplus, ANY), "clamp": (lambda x: x.clamp(-0.5, 0.5), ANY),
}
BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "maximum": torch.maximum,
    "minimum": torch.minimum, "pow": lambda a, b: torch.pow(a.abs() + 0.5, b), "atan2": torch.atan2,
    "where": lambda a, b: torch.where(a > 0, a, b), "lerp": lambda a, b: torch.lerp(a, b, 0.3),
}
REDUCTIONS = {
    "sum": lambda x: x.sum(-1), "mean": lambda x: x.mean(0), "amax": lambda x: x.amax(-1), "amin": lambda x: x.amin(0),
    "prod": lambda x: (x * 0.2 + 1).prod(-1), "var": lambda x: x.var(-1), "std": lambda x: x.std(0),
    "softmax": lambda x: x.softmax(-1), "log_softmax": lambda x: x.log_softmax(-1), "logsumexp": lambda x: x.logsumexp(-1),
    "norm": lambda x: x.norm(dim=-1),
}
NORMS_AND_VIEWS = {
    "layer_norm": lambda x: F.layer_norm(x, x.shape[-1:]), "rms_norm": lambda x: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6),
    "group_norm": lambda x: F.group_norm(x.view(2, 4, -1), 2), "transpose": lambda x: x.t() * 2,
    "view_cat": lambda x: torch.cat([x, x.flip(0)], 0).view(-1, 2).sin(), "slice_stack": lambda x: torch.stack([x[:, :3], x[:, 2:5]]).exp(),
    "gather": lambda x: x.gather(1, torch.tensor([[0, 2], [1, 1], [4, 0], [3, 3], [2, 1], [0, 0], [1, 4], [2, 2]])),
    "embedding": lambda x: F.embedding(torch.tensor([[1, 3], [0, 7]]), x),
}


def grads_match(fn, *inputs, rtol=1e-4, atol=1e-5):
    compiled = kiln.compile(fn)
    for _ in range(2):
        xs = [t() for t in inputs]
        a = [x.clone().requires_grad_() for x in xs]
        b = [x.clone().requires_grad_() for x in xs]
        out_a, out_b = compiled(*a), fn(*b)
        assert_same(out_a, out_b, rtol=rtol, atol=atol)
        weights = torch.randn_like(out_b)  # a loss that weights every output element differently
        (out_a * weights).sum().backward()
        (out_b * weights).sum().backward()
        for p, q in zip(a, b):
            assert_same(p.grad, q.grad, rtol=rtol, atol=atol)
    statuses = [g.training_status for g in _codegen.GRAPHS]
    assert statuses and all(s.startswith("compiled forward and backward") for s in statuses), statuses


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_gradients(name):
    fn, make = UNARY[name]
    grads_match(lambda x: fn(x) * 1.5, lambda: make(8, 5))


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_gradients_with_broadcasting(name):
    fn = BINARY[name]
    grads_match(lambda a, b: fn(a, b), lambda: torch.randn(8, 5), lambda: torch.randn(5))


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reduction_gradients(name):
    grads_match(REDUCTIONS[name], lambda: torch.randn(8, 5))


@pytest.mark.parametrize("name", sorted(NORMS_AND_VIEWS))
def test_norm_view_and_indexing_gradients(name):
    grads_match(NORMS_AND_VIEWS[name], lambda: torch.randn(8, 5))
