"""numpy on Python and numpy scalars is evaluated during capture (pure, with sizes among the
arguments specialised and guarded), so `x / np.sqrt(d)` stays one graph; numpy.random and numpy on
tensors are never folded. Tensor.type() gives the legacy type name or converts."""
import numpy as np
import pytest
import torch

import kiln
from conftest import check


def x46():
    return [torch.randn(4, 6)]


@pytest.mark.parametrize("fn", [
    lambda x: x / np.sqrt(x.shape[-1]),
    lambda x: x * np.float32(2.5) + np.float64(0.5),
    lambda x: x.reshape(int(np.prod(x.shape))) * 2,
    lambda x: torch.sin(x * np.pi) + np.log(2.0),
    lambda x: x * int(np.clip(x.shape[0] * 3, 0, 10)),
    lambda x: x + float(np.float16(1.5) * np.int8(3)),
], ids=["sqrt_of_size", "numpy_scalars", "prod_of_shape", "constants", "clip_of_size", "scalar_arith"])
def test_numpy_on_scalars_is_folded(fn):
    check(fn, x46)


def test_a_size_folded_through_numpy_is_guarded():
    c = kiln.compile(lambda x: x / np.sqrt(x.shape[-1]), dynamic=False)
    for n in (4, 9):
        x = torch.randn(3, n)
        torch.testing.assert_close(c(x), x / np.sqrt(n))


def test_numpy_random_is_never_folded():
    def f(x):
        return x * np.random.rand()

    c = kiln.compile(f)
    x = torch.randn(4)
    for seed in (0, 1):
        np.random.seed(seed)
        want = f(x)
        np.random.seed(seed)
        torch.testing.assert_close(c(x), want)
    np.random.seed(5)
    a = c(x)
    b = c(x)
    assert not torch.equal(a, b)  # a new draw each call


def test_numpy_on_a_tensor_is_not_folded():
    def f(x):
        return torch.as_tensor(np.sqrt(x.numpy())) + 1

    c = kiln.compile(f)
    for _ in range(2):
        x = torch.rand(5)
        torch.testing.assert_close(c(x), f(x))


def test_tensor_type():
    def f(x):
        return x.type("torch.DoubleTensor").sum(), x.int().type(), x.type(torch.float16), x.type(), x.type(x.dtype)

    c = kiln.compile(f)
    x = torch.randn(4, 3)
    got, want = c(x), f(x)
    assert got[1] == want[1] == "torch.IntTensor" and got[3] == want[3] == "torch.FloatTensor"
    for g, w in ((got[0], want[0]), (got[2], want[2]), (got[4], want[4])):
        assert g.dtype == w.dtype
        torch.testing.assert_close(g, w)
    s = kiln.stats()
    assert s["graphs"] == 1 and s["graph_breaks"] == 0, s["breaks"]
