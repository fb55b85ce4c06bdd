"""`global g; g = v` is a side effect replayed once after the graph (later reads in the capture
see the new value); str.join over a generator of constants is folded."""
import torch

import kiln
from conftest import check

SCALE_G = 1.0
LOG_G = None


def test_store_global_replayed_once_and_read_back():
    def fn(x):
        global SCALE_G, LOG_G
        SCALE_G = x.shape[1] * 0.5
        LOG_G = [x.shape[0], "seen"]
        return x * SCALE_G
    compiled = kiln.compile(fn)
    for n in (4, 4):
        x = torch.randn(3, n)
        globals()["SCALE_G"] = 1.0
        globals()["LOG_G"] = None
        want = fn(x)
        want_g = (SCALE_G, LOG_G)
        globals()["SCALE_G"] = 1.0
        globals()["LOG_G"] = None
        got = compiled(x)
        torch.testing.assert_close(got, want)
        assert (SCALE_G, LOG_G) == want_g
    first = LOG_G
    compiled(torch.randn(3, 4))
    assert LOG_G is not first  # a new list each call, as eager makes
    s = kiln.stats()
    assert s["graphs"] == 1 and s["graph_breaks"] == 0, s["breaks"]


def test_store_global_tensor_value():
    def fn(x):
        global LOG_G
        LOG_G = x * 2
        return LOG_G + 1
    check(fn, lambda: (torch.randn(4),))
    assert isinstance(LOG_G, torch.Tensor)


def test_join_over_generator():
    def fn(x):
        s = ",".join(str(d) for d in x.shape)
        return x + len(s), s
    check(fn, lambda: (torch.randn(4, 8),))


def _inner(x):
    yield x
    yield x * 2


def _chain(x):
    yield from x.unbind(0)
    yield from _inner(x[0])
    yield from [x.sum(0)]


def test_yield_from_in_an_inlined_generator():
    def fn(x):
        return torch.stack(list(_chain(x[:2])))
    check(fn, lambda: (torch.randn(4, 3),))


def _uses_result(x):
    r = yield from _inner(x)
    yield r


def test_yield_from_whose_value_is_used_is_not_captured_wrongly():
    def fn(x):
        return list(_uses_result(x))
    compiled = kiln.compile(fn)
    for _ in range(2):
        x = torch.randn(3)
        got, want = compiled(x), fn(x)
        assert len(got) == len(want) == 3 and got[2] is None and want[2] is None
        torch.testing.assert_close(got[1], want[1])
