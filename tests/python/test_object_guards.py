"""Objects a frame is given (instances of user classes) are guarded by their type and by what the
capture reads of them, not by identity: a new object each call (a KV cache, a dataclass of
outputs) hits the cache. Side effects reach the call's own object. Where the capture does depend
on which object it is (`a is b`, a C method bound to it), identity is guarded then."""
import torch

import kiln


class Cache:
    def __init__(self, n=2, size=3):
        self.layers = [Layer(size) for _ in range(n)]


class Layer:
    def __init__(self, size):
        self.keys = torch.zeros(1, size)
        self.ready = False

    def update(self, k):
        self.keys = torch.cat([self.keys, k], dim=0)
        self.ready = True
        return self.keys


def step(x, cache):
    out = []
    for layer in cache.layers:
        out.append(layer.update(x).sum(0))
    return torch.stack(out)


def test_new_object_each_call_hits_the_cache_and_mutates_that_object():
    compiled = kiln.compile(step, dynamic=False)
    for _ in range(4):
        ce, cc = Cache(), Cache()
        x = torch.randn(1, 3)
        want = step(x, ce)
        got = compiled(x, cc)
        torch.testing.assert_close(got, want)
        for le, lc in zip(ce.layers, cc.layers):
            torch.testing.assert_close(lc.keys, le.keys)
            assert lc.ready is True
    s = kiln.stats()
    assert s["frames_compiled"] == 1 and s["recompiles"] == 0, s


def test_a_changed_attribute_fails_the_guard():
    compiled = kiln.compile(step, dynamic=False)
    c = Cache()
    compiled(torch.randn(1, 3), c)
    c2 = Cache(n=3)  # same type, one more layer: the list's length is guarded
    x = torch.randn(1, 3)
    want = step(x, Cache(n=3))
    torch.testing.assert_close(compiled(x, c2), want)
    assert kiln.stats()["recompiles"] == 1


class Box:
    def __init__(self, v):
        self.v = v


def same_box(a, b, x):
    if a is b:
        return x + a.v
    return x * a.v * b.v


def test_identity_comparison_guards_identity():
    compiled = kiln.compile(same_box)
    x = torch.randn(3)
    a, b = Box(2.0), Box(3.0)
    torch.testing.assert_close(compiled(a, b, x), same_box(a, b, x))
    torch.testing.assert_close(compiled(a, a, x), same_box(a, a, x))  # must not reuse "a is not b"
    c = Box(2.0)
    torch.testing.assert_close(compiled(c, c, x), same_box(c, c, x))


class Flagged:
    def __init__(self, on):
        if on:
            self.extra = 5.0


def uses_hasattr(o, x):
    return x + (o.extra if hasattr(o, "extra") else 1.0)


def test_hasattr_is_guarded_on_the_instance_dict():
    compiled = kiln.compile(uses_hasattr)
    x = torch.randn(3)
    for on in (True, False, True, False):
        torch.testing.assert_close(compiled(Flagged(on), x), uses_hasattr(Flagged(on), x))
    assert kiln.stats()["frames_compiled"] <= 2


class Output(dict):
    pass


def reads_dict_subclass(o, x):
    return x * len(o)


def test_c_methods_of_a_dict_subclass_guard_identity():
    compiled = kiln.compile(reads_dict_subclass)
    x = torch.randn(3)
    o = Output(a=1)
    torch.testing.assert_close(compiled(o, x), x * 1)
    o2 = Output(a=1, b=2)  # another object, another length: must not reuse the folded len()
    torch.testing.assert_close(compiled(o2, x), x * 2)


class Settings:
    def __init__(self, scale):
        self.scale = scale


CONFIG = Settings(2.0)


def scaled(x):
    return x * CONFIG.scale


def test_identity_guards_hold_their_object_weakly():
    import gc
    import weakref
    global CONFIG
    compiled = kiln.compile(scaled)
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), x * 2.0)
    ref = weakref.ref(CONFIG)
    CONFIG = Settings(3.0)  # the old object is gone: nothing kiln holds keeps it alive
    gc.collect()
    assert ref() is None
    torch.testing.assert_close(compiled(x), x * 3.0)


def store_then_read_through_another_name(a, b, x):
    a.v = x * 3
    return b.v + 1


def test_a_store_read_back_through_another_argument_guards_that_they_are_one_object():
    compiled = kiln.compile(store_then_read_through_another_name)
    x = torch.randn(3)
    o = Box(torch.zeros(3))
    torch.testing.assert_close(compiled(o, o, x), x * 3 + 1)
    p, q = Box(torch.zeros(3)), Box(torch.ones(3))  # now two objects: b.v is q's own value
    torch.testing.assert_close(compiled(p, q, x), torch.ones(3) + 1)
    torch.testing.assert_close(p.v, x * 3)
