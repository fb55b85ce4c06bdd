"""Constructs torch.compile captures without breaking, captured by kiln too (tests/corpus has them
beside Dynamo's counts): `assert` on a tensor, `while` on a tensor, lru_cache returning a tensor,
object() sentinels, vars(obj), dataclasses.asdict. Each compares with eager, exceptions included."""
import dataclasses
import functools

import pytest
import torch

import kiln
import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
import tests.python.break_parity_programs as _programs  # noqa: E402

LOG = []


def compiled(fn, backend="eager"):
    kiln.reset()
    return kiln.compile(fn, backend=backend)


def counts():
    s = kiln.stats()
    return s["graphs"], s["graph_breaks"]


# ---- assert on a tensor (programs live outside test modules: pytest rewrites their asserts) ----
from tests.corpus.programs import LOG, branch_assert as assert_finite, branch_assert_not as assert_not_any  # noqa: E402


def assert_then_write_input(x):
    return _programs.assert_then_write_input(x)


@pytest.mark.parametrize("backend", ["eager", "kiln"])
@pytest.mark.parametrize("fn", [assert_finite, assert_not_any])
def test_assert_on_a_tensor_is_one_graph_and_raises_as_eager(fn, backend):
    c = compiled(fn, backend)
    x = torch.randn(4, 8)
    torch.testing.assert_close(c(x), fn(x))
    assert counts() == (1, 0)
    bad = torch.randn(4, 8)
    bad[1, 2] = float("inf") if fn is assert_finite else float("nan")
    LOG.clear()
    with pytest.raises(AssertionError) as eager:
        fn(bad)
    eager_log = list(LOG)
    LOG.clear()
    with pytest.raises(AssertionError) as got:
        c(bad)
    assert str(got.value) == str(eager.value)
    assert LOG == eager_log  # side effects up to the assert, as in eager


def test_assert_in_a_graph_that_writes_its_inputs_breaks_there():
    c = compiled(assert_then_write_input)
    x = torch.ones(3)
    torch.testing.assert_close(c(x.clone()), assert_then_write_input(x.clone()))
    bad = -torch.ones(3)
    with pytest.raises(AssertionError):
        c(bad)
    torch.testing.assert_close(bad, -torch.ones(3))  # not written: the assert came first
    assert "writes its inputs" in kiln.stats()["breaks"][0]["reason"]


def test_assert_on_a_many_element_tensor_raises_as_eager():
    def f(x):
        assert x > 0
        return x
    with pytest.raises(RuntimeError):
        compiled(f)(torch.ones(3))


# ---- while on a tensor ---------------------------------------------------------------------------
def halve_until_small(x):
    n = 0
    while x.abs().max() > 0.5:
        x = x / 2
        n += 1
    return x, n


def test_while_on_a_tensor_splits_and_reuses_resume_functions():
    c = compiled(halve_until_small)
    for scale in (100.0, 1000.0, 10.0, 0.1):
        x = torch.randn(4, 8) * scale
        got, want = c(x), halve_until_small(x)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1]
    graphs, breaks = counts()
    assert breaks <= 5, (graphs, breaks)  # one resume function per branch target, not per iteration


def test_a_long_tensor_while_loop_does_not_recurse_without_bound():
    def f(x):
        n = 0
        while x.sum() > 0:
            x = x - 1
            n += 1
        return n
    assert compiled(f)(torch.full((2,), 1500.0)) == f(torch.full((2,), 1500.0))


# ---- lru_cache, object(), vars(), dataclasses.asdict ----------------------------------------------
@functools.lru_cache(maxsize=4)
def _mask(n):
    return torch.ones(n, n).tril()


def test_lru_cache_returning_a_tensor_is_traced():
    f = lambda x: x[:, :4] * _mask(x.shape[0])  # noqa: E731
    x = torch.randn(4, 8)
    torch.testing.assert_close(compiled(f)(x), f(x))
    assert counts() == (1, 0)


def test_object_sentinel_and_attribute_errors():
    def f(x):
        o = object()
        try:
            v = o.missing
        except AttributeError:
            v = 0.5
        try:
            o.field = 1
        except AttributeError:
            v = v * 2
        return x * v, o is o
    x = torch.randn(3)
    got, want = compiled(f)(x), f(x)
    torch.testing.assert_close(got[0], want[0])
    assert got[1] is True
    assert counts() == (1, 0)


class _C:
    pass


def test_vars_is_live_and_is_the_objects_dict():
    def f(x):
        c = _C()
        c.a = 1.0
        d = vars(c)
        c.b = 2.0
        return x * c.a, d, c, len(d)
    got, want = compiled(f)(torch.ones(2)), f(torch.ones(2))
    assert got[1] == want[1] == {"a": 1.0, "b": 2.0}
    assert got[1] is got[2].__dict__ and got[3] == want[3] == 2
    assert counts()[1] == 0


@dataclasses.dataclass(frozen=True)
class _Cfg:
    hidden: int = 8
    scale: float = 0.5
    name: str = "cfg"


def test_dataclasses_asdict_of_constants():
    def f(x):
        c = _Cfg(hidden=4)
        return x[:, : c.hidden] * c.scale, dataclasses.asdict(c)
    x = torch.randn(2, 8)
    got, want = compiled(f)(x), f(x)
    torch.testing.assert_close(got[0], want[0])
    assert got[1] == want[1]
    assert counts() == (1, 0)


# ---- generator.send ------------------------------------------------------------------------------
def _accumulator():
    total = 0
    while True:
        v = yield total
        total = total + v


def test_generator_send_is_captured():
    def f(x):
        g = _accumulator()
        next(g)
        g.send(x)
        return g.send(x * 2)
    x = torch.randn(3)
    torch.testing.assert_close(compiled(f)(x), f(x))
    assert counts() == (1, 0)


def test_generator_send_stop_iteration_and_default():
    def f(x):
        def two():
            a = yield 1
            b = yield a * 2
            return b
        g = two()
        r = [next(g), g.send(x)]
        try:
            g.send(x + 1)
        except StopIteration:
            r.append("stop")
        r.append(next(g, "done"))
        return r
    x = torch.randn(3)
    got, want = compiled(f)(x), f(x)
    assert got[0] == want[0] and got[2:] == want[2:]
    torch.testing.assert_close(got[1], want[1])
    assert counts()[1] == 0


def test_generator_send_errors_as_in_eager():
    def just_started(x):
        return _accumulator().send(x)

    def iterated(x):
        g = _accumulator()
        next(g)
        for v in g:  # each yield evaluates to None under iteration: total + None raises
            return v
    for fn in (just_started, iterated):
        with pytest.raises(TypeError) as eager:
            fn(torch.ones(2))
        with pytest.raises(TypeError) as got:
            compiled(fn)(torch.ones(2))
        assert str(got.value) == str(eager.value)


# ---- torch.inference_mode ------------------------------------------------------------------------
SINK = []


def _im_break(x):
    with torch.inference_mode():
        y = x * 2
        SINK.append(torch.is_inference_mode_enabled())
        print(end="")  # a graph break inside the block
        y = y + 1
    return y.clone()


def _im_pure(x):
    with torch.inference_mode():
        y = x * 2 + 1
        v = x.view(-1)
        flags = (y.is_inference(), v.is_inference(), torch.is_inference_mode_enabled())
    return y, v, flags, torch.is_inference_mode_enabled()


def _im_mixed(x):
    z = x.sin()
    with torch.inference_mode():
        s = (x * 2).sum()
    return z * 3, torch.is_grad_enabled()


def _im_escapes(x):
    z = x.sin()
    with torch.inference_mode():
        y = x * 2
    return z, y


def _im_write_outside(x):
    with torch.inference_mode():
        y = x * 2
    y.add_(1)
    return y


def _im_grad_use(x):
    w = torch.ones(4, 8, requires_grad=True)
    with torch.inference_mode():
        y = x * 2
    return (y * w).sum()


def _describe(r):
    if isinstance(r, torch.Tensor):
        return ("tensor", tuple(r.shape), r.dtype, r.requires_grad, r.is_inference(), [round(v, 4) for v in r.detach().flatten().tolist()])
    if isinstance(r, (tuple, list)):
        return tuple(_describe(v) for v in r)
    return r


def _outcome(fn, x):
    try:
        return _describe(fn(x))
    except Exception as e:  # noqa: BLE001
        return type(e).__name__


@pytest.mark.parametrize("backend", ["eager", "kiln"])
@pytest.mark.parametrize("fn,breaks", [(_im_break, 1), (_im_pure, 0), (_im_mixed, 0), (_im_escapes, 1), (_im_write_outside, 1),
                                       (_im_grad_use, 1)], ids=["break_inside", "pure", "mixed", "escapes", "write_outside", "grad_use"])
def test_inference_mode_matches_eager(fn, breaks, backend):
    x = torch.randn(4, 8, requires_grad=True)
    SINK.clear()
    want = _outcome(fn, x)
    want_sink = list(SINK)
    c = compiled(fn, backend)
    for _ in range(2):
        SINK.clear()
        assert _outcome(c, x) == want
        assert SINK == want_sink
        assert torch.is_grad_enabled() and not torch.is_inference_mode_enabled()  # the state is left as eager leaves it
    assert counts()[1] == breaks, kiln.stats()["breaks"]
