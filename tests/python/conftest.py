"""Shared helpers: compile a callable, run it and eager on fresh random inputs, compare."""
import os
import sys

import pytest
import torch

try:  # an installed or sanitized kiln (scripts/sanitize.sh puts one on PYTHONPATH) wins
    import kiln  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
import kiln  # noqa: E402


@pytest.fixture(autouse=True)
def _fresh_kiln():
    kiln.reset()
    torch.manual_seed(1234)
    yield
    kiln.reset()


def assert_same(actual, expected, rtol=1e-5, atol=1e-6):
    """Values, dtypes, shapes and strides of (nested) results must match eager."""
    assert type(actual) is type(expected), f"type {type(actual)} != {type(expected)}"
    if isinstance(expected, torch.Tensor):
        assert actual.dtype == expected.dtype, f"dtype {actual.dtype} != {expected.dtype}"
        assert actual.shape == expected.shape, f"shape {actual.shape} != {expected.shape}"
        assert actual.device == expected.device
        if expected.numel() > 1:
            assert actual.stride() == expected.stride(), f"stride {actual.stride()} != {expected.stride()}"
        assert actual.requires_grad == expected.requires_grad
        torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=True)
    elif isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert_same(a, e, rtol, atol)
    elif isinstance(expected, dict):
        assert list(actual) == list(expected)
        for k in expected:
            assert_same(actual[k], expected[k], rtol, atol)
    else:
        assert actual == expected


def clone_args(args):
    return [a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a for a in args]


def check(fn, make_args, *, graphs=1, breaks=0, calls=2, **compile_kwargs):
    """Compile `fn`; for `calls` fresh random input sets compare compiled vs eager.

    `graphs`/`breaks`: the exact counts kiln.stats() must report (None: don't check)."""
    compiled = kiln.compile(fn, **compile_kwargs)
    for _ in range(calls):
        args = make_args()
        expected = fn(*clone_args(args))
        actual = compiled(*clone_args(args))
        assert_same(actual, expected)
    s = kiln.stats()
    if breaks is not None:
        assert s["graph_breaks"] == breaks, s["breaks"]
    if graphs is not None:
        assert s["graphs"] == graphs, (s["graphs"], s["breaks"])
    return compiled
