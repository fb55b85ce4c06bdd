"""Shared helpers: compile a callable, run it and eager on fresh random inputs, compare."""
import math
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
    elif isinstance(expected, float) and math.isfinite(expected):
        # A Python float computed in the graph (a 0-d float64 tensor) may differ from CPython's in
        # the last bit: `t ** 2` is the C library's pow in CPython, t * t in ATen and in generated
        # code (a compiler folds pow(t, 2.0) into it), and the two round differently for some t
        # (0.11593859983858004). Two units in the last place, no more.
        assert abs(actual - expected) <= 2 * math.ulp(expected), f"{actual!r} != {expected!r}"
    else:
        assert actual == expected or (actual != actual and expected != expected), f"{actual!r} != {expected!r}"


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


def tiny_llama(attn_implementation=None):
    """A two-layer transformers Llama small enough for unit tests, in eval mode."""
    from transformers import LlamaConfig, LlamaModel
    cfg = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, vocab_size=256)
    if attn_implementation:
        cfg._attn_implementation = attn_implementation
    return LlamaModel(cfg).eval()


def llama_graph_texts(compiled, model, length=32):
    """Runs `compiled` against eager `model` twice on fresh ids, then twice with a padded
    attention_mask; returns the ATen graphs kiln compiled for each: (unpadded, padded)."""
    from kiln import _codegen
    with torch.no_grad():
        for _ in range(2):
            ids = torch.randint(0, 256, (2, length))
            assert_same(compiled(ids).last_hidden_state, model(ids).last_hidden_state, rtol=1e-4, atol=1e-5)
        unpadded = [g.graph_text for g in _codegen.GRAPHS]
        mask = torch.ones(2, length, dtype=torch.long)
        mask[0, :5] = 0
        for _ in range(2):
            ids = torch.randint(0, 256, (2, length))
            assert_same(compiled(ids, attention_mask=mask).last_hidden_state, model(ids, attention_mask=mask).last_hidden_state,
                        rtol=1e-4, atol=1e-5)
    return unpadded, [g.graph_text for g in _codegen.GRAPHS][len(unpadded):]
