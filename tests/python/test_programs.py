"""Every program of the corpus (programs.py) compiled vs eager, float32 and float64, on fresh
random inputs: one graph, no fallback, same values, dtypes, shapes and strides."""
import pytest
import torch

from conftest import check
from programs import PROGRAMS

DTYPES = [torch.float32, torch.float64]
NO_OPERATOR = {"returns_constant_and_input"}


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("name,fn,make_args", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_program(name, fn, make_args, dtype):
    module = getattr(fn, "module", None)
    if module is not None and dtype == torch.float64:
        module.double()
        mk = lambda: tuple(a.double() if a.is_floating_point() else a for a in make_args(dtype))  # noqa: E731
    else:
        mk = lambda: make_args(dtype)  # noqa: E731
    # A program with no tensor operation is a cache entry that runs as the frame would, not a
    # graph (as Dynamo counts them).
    check(fn, mk, graphs=0 if name in NO_OPERATOR else 1)


def test_corpus_is_large_enough():
    assert len(PROGRAMS) * len(DTYPES) >= 300
