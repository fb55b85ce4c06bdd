"""Objects created during capture (dataclasses, caches, dict subclasses), super(), attribute side
effects on existing objects, sets, and a real third-party model: transformers' GPT-2."""
import dataclasses
from collections import OrderedDict

import pytest
import torch

import kiln
from conftest import assert_same, check


@dataclasses.dataclass
class Output:
    value: torch.Tensor
    aux: list = None
    scale: float = 1.0


class Cache:
    def __init__(self, n):
        self.layers = [None] * n

    def update(self, i, t):
        self.layers[i] = t if self.layers[i] is None else torch.cat([self.layers[i], t])
        return self.layers[i]

    @property
    def filled(self):
        return sum(1 for x in self.layers if x is not None)


class Record(OrderedDict):
    def __setattr__(self, name, value):
        super().__setitem__(name, value)
        super().__setattr__(name, value)


class Base:
    def f(self, x):
        return x + 1


class Derived(Base):
    def f(self, x):
        return super().f(x) * 2


def returns_dataclass(x):
    return Output(x * 2, [x + 1], scale=3.0)


def uses_cache(x):
    c = Cache(2)
    c.update(0, x)
    c.update(0, x * 2)
    c.update(1, x.sum(0, keepdim=True))
    return c.layers[0] * c.filled, c


def dict_subclass(x):
    r = Record()
    r.a = x * 2
    r["b"] = x + 1
    return r


def super_call(x):
    return Derived().f(x)


def set_ops(x):
    names = {k for k in ("a", "b", "a")}
    return x * len(names) if "a" in names else x


def test_dataclass_returned():
    x = torch.randn(3)
    out = kiln.compile(returns_dataclass, fullgraph=True)(x)
    assert isinstance(out, Output) and out.scale == 3.0
    assert_same(out.value, x * 2) and assert_same(out.aux[0], x + 1)
    assert kiln.stats()["graphs"] == 1


def test_object_with_methods_and_property():
    x = torch.randn(2, 3)
    c = kiln.compile(uses_cache, fullgraph=True)
    out, cache = c(x)
    ref, rcache = uses_cache(x)
    assert_same(out, ref)
    assert isinstance(cache, Cache) and len(cache.layers) == 2
    assert_same(cache.layers[0], rcache.layers[0])
    assert cache.filled == 2  # a real object: its methods work after the call


def test_ordered_dict_subclass_rebuilt_in_order():
    x = torch.randn(3)
    out = kiln.compile(dict_subclass, fullgraph=True)(x)
    assert type(out) is Record and list(out.keys()) == ["a", "b"]
    assert_same(out["a"], x * 2) and assert_same(out.a, x * 2) and assert_same(out["b"], x + 1)


def test_super_zero_argument():
    check(super_call, lambda: (torch.randn(3),), fullgraph=True)


def test_sets_of_constants():
    check(set_ops, lambda: (torch.randn(3),))


class Counter:
    def __init__(self):
        self.calls = 0
        self.last = None


COUNTER = Counter()


def counts(x):
    COUNTER.calls = COUNTER.calls + 1
    y = x * 2
    COUNTER.last = y
    return y + COUNTER.calls


def test_attribute_side_effects_on_global_object():
    c = kiln.compile(counts)
    x = torch.randn(3)
    out1 = c(x)
    assert COUNTER.calls == 1 and torch.equal(COUNTER.last, x * 2) and torch.equal(out1, x * 2 + 1)
    out2 = c(x)  # the guard on COUNTER.calls changed: recompiles, still correct
    assert COUNTER.calls == 2 and torch.equal(out2, x * 2 + 2)


transformers = pytest.importorskip("transformers")


def _gpt2(layers=2):
    from transformers import GPT2Config, GPT2Model
    torch.manual_seed(0)
    return GPT2Model(GPT2Config(n_layer=layers))


def test_gpt2_one_graph_inference():
    m = _gpt2().eval()
    c = kiln.compile(m, fullgraph=True)
    for _ in range(2):
        idx = torch.randint(0, 50000, (2, 12))
        with torch.no_grad():
            out, ref = c(idx), m(idx)
        assert type(out) is type(ref) and list(out.keys()) == list(ref.keys())
        assert_same(out.last_hidden_state, ref.last_hidden_state, rtol=1e-4, atol=1e-5)
        for a, b in zip(out.past_key_values.layers, ref.past_key_values.layers):
            assert_same(a.keys, b.keys, rtol=1e-4, atol=1e-5) and assert_same(a.values, b.values, rtol=1e-4, atol=1e-5)
        assert out.past_key_values.get_seq_length() == 12
    s = kiln.stats()
    assert s["graphs"] == 1 and s["graph_breaks"] == 0 and s["cache_hits"] == 1


def test_gpt2_training_gradients():
    m = _gpt2().train()
    c = kiln.compile(m, fullgraph=True)
    idx = torch.randint(0, 50000, (2, 8))
    torch.manual_seed(3)
    a = c(idx).last_hidden_state
    torch.manual_seed(3)
    b = m(idx).last_hidden_state
    assert_same(a, b, rtol=1e-4, atol=1e-5)
    a.pow(2).mean().backward()
    g = [p.grad.clone() for p in m.parameters()]
    m.zero_grad()
    b.pow(2).mean().backward()
    for x, p in zip(g, m.parameters()):
        torch.testing.assert_close(x, p.grad, rtol=1e-4, atol=1e-6)


def test_write_backs_keep_containers_alive_while_replaying():
    # Replaying d's write-back clears d, which held the only reference to the list that the
    # next write-back fills: the replay must own it (a use-after-free before).
    def fn(d, x):
        v = d.pop("k")
        v.append(1)
        d["n"] = len(v)
        return x + 1
    compiled = kiln.compile(fn, backend="eager")
    for i in range(4):
        d, e = {"k": [0] * i, "j": 2}, {"k": [0] * i, "j": 2}
        assert_same(compiled(d, torch.ones(2)), fn(e, torch.ones(2)))
        assert d == e


def test_list_insert_and_pop_at_a_symbolic_position():
    def fn(xs, t, n):
        xs.insert(n, t * 2)
        return xs.pop(n) + t, len(xs)
    compiled = kiln.compile(fn, backend="eager")
    for n in (1, 2, 3, 2):
        a, b = [torch.ones(1)] * 4, [torch.ones(1)] * 4
        t = torch.randn(3)
        assert_same(compiled(a, t, n), fn(b, t, n))


class _RenamingMeta(type):
    """Like transformers 5.24's ModelOutput metaclass: it only changes what the class itself is given."""

    def __setattr__(cls, name, value):
        super().__setattr__(name, value)


class _CountingMeta(type):
    calls = 0

    def __call__(cls, *args, **kwargs):
        _CountingMeta.calls += 1
        return super().__call__(*args, **kwargs)


class _OutputWithSetattr(OrderedDict, metaclass=_RenamingMeta):
    def __init__(self, hidden, extra=None):
        super().__init__()
        self.hidden = hidden
        self.extra = extra

    def __setattr__(self, name, value):
        name = "cache" if name == "past" else name
        if value is not None:
            super().__setitem__(name, value)
        super().__setattr__(name, value)


class _Counted(metaclass=_CountingMeta):
    def __init__(self, x):
        self.x = x


def test_object_whose_metaclass_keeps_type_call_is_built_in_the_graph():
    def fn(x):
        out = _OutputWithSetattr(x * 2)
        out.past = x + 1  # its __setattr__ renames and also stores the item
        return out

    check(fn, lambda: (torch.randn(3, 4),))  # one graph, no break
    r = kiln.compile(fn)(torch.ones(2))
    assert type(r) is _OutputWithSetattr and list(r.keys()) == ["hidden", "cache"] and r.extra is None


def test_metaclass_call_still_runs_for_every_construction():
    _CountingMeta.calls = 0
    f = kiln.compile(lambda x: _Counted(x + 1).x * 2)
    for _ in range(3):
        assert_same(f(torch.ones(3)), torch.full((3,), 4.0))
    assert _CountingMeta.calls == 3  # never skipped by a graph that builds the object itself
