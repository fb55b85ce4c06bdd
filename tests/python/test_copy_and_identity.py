"""id() and copy.deepcopy inside captured code, as Dynamo traces them: real ids of objects the
capture specialises on, fake ids of values made while capturing (dict keys and ==/!= only),
copy.deepcopy inlined (object.__reduce_ex__, object.__new__, filling the copy's __dict__), lookups
in dispatch tables keyed by class, config-like classes with __getattribute__/__setattr__
overrides and attribute deletion on copies, and dict-subclass instances (a ModelOutput) passed in."""
import copy
from collections import OrderedDict

import torch

import kiln
from conftest import assert_same, check


def x1():
    return (torch.randn(4),)


class Settings:
    def __init__(self):
        self.scale = 2
        self.shifts = [1, 2]
        self.table = {"a": 3, 4: "four"}


SETTINGS = Settings()


def stats():
    s = kiln.stats()
    return s["graphs"], s["graph_breaks"], s["recompiles"]


# ---------------------------------------------------------------- id()

def test_id_of_an_existing_object_is_its_real_id():
    def fn(x):
        return x * 2, id(SETTINGS), id(SETTINGS) == id(SETTINGS), id(None)
    check(fn, x1)


def test_ids_of_values_made_here_key_a_dict_and_compare():
    def fn(x):
        a, b = [x], [x * 2]
        memo = {id(a): a, id(b): b}
        return memo[id(b)][0] + memo[id(a)][0], id(a) == id(a), id(a) != id(b), id(x) == id(x + 0), id(3) == id(3)
    check(fn, x1)


def test_a_fake_id_handed_back_or_computed_with_runs_eagerly():
    def handed_back(x):
        return x * 2, id([x])

    def arithmetic(x):
        return x * 2, id([x]) + 1 > 0
    for fn, why in ((handed_back, "handed back"), (arithmetic, "Python computation")):
        kiln.reset()
        c = kiln.compile(fn, backend="eager")
        out = c(torch.ones(2))
        assert torch.equal(out[0], torch.full((2,), 2.0)) and isinstance(out[1], int)
        s = kiln.stats()
        assert s["graphs"] == 0 and why in s["breaks"][0]["reason"] and "id()" in s["breaks"][0]["reason"], s["breaks"]


# ---------------------------------------------------------------- copy.deepcopy

def test_deepcopy_of_a_config_like_object_is_inlined():
    def fn(x):
        c = copy.deepcopy(SETTINGS)
        c.shifts.append(10)
        c.table["a"] = 5
        return x * c.scale + sum(c.shifts) + c.table["a"] + len(SETTINGS.shifts) + SETTINGS.table["a"]
    check(fn, x1)
    assert SETTINGS.shifts == [1, 2] and SETTINGS.table == {"a": 3, 4: "four"}


def test_deepcopy_guards_what_it_copied():
    obj = Settings()

    def fn(x):
        return x * copy.deepcopy(obj).scale
    c = kiln.compile(fn, backend="eager")
    x = torch.randn(3)
    assert_same(c(x), x * 2)
    obj.scale = 5  # the copied attribute changed: the guard fails and the capture is redone
    assert_same(c(x), x * 5)
    assert stats() == (2, 0, 1)


def test_deepcopy_of_a_dict_argument_returned_and_mutated():
    def fn(x, d):
        e = copy.deepcopy(d)
        e["l"].append(x.sum())
        e["n"] = e["n"] + 1
        return x + e["n"], e, e["l"] is not d["l"]
    check(fn, lambda: (torch.randn(3), {"n": 1, "l": [1, 2], "t": (1, "a")}))


def test_deepcopy_returns_a_new_object_each_call():
    def fn(x):
        return x + 1, copy.deepcopy(SETTINGS)
    c = kiln.compile(fn, backend="eager")
    _, a = c(torch.ones(1))
    _, b = c(torch.ones(1))
    assert type(a) is Settings and a is not SETTINGS and a is not b and a.shifts is not b.shifts
    assert vars(a) == vars(SETTINGS) == vars(b)
    assert stats() == (1, 0, 0)


class WithOwnDeepcopy:
    def __init__(self):
        self.v = 3

    def __deepcopy__(self, memo):
        out = WithOwnDeepcopy()
        out.v = self.v * 10
        return out


OWN = WithOwnDeepcopy()


class Slotted:
    __slots__ = ("v",)

    def __init__(self):
        self.v = 4


SLOTTED = Slotted()


def test_deepcopy_of_classes_with_their_own_protocol_matches_eager():
    check(lambda x: x * copy.deepcopy(OWN).v, x1)
    kiln.reset()
    check(lambda x: x * copy.deepcopy(SLOTTED).v, x1, graphs=None, breaks=None)  # __slots__: not inlined, still right


# ---------------------------------------------------------------- dispatch tables keyed by class

REGISTRY = {int: lambda v: v + 1, float: lambda v: v * 2}


def test_lookup_keyed_by_class_in_an_existing_dict_is_guarded_by_entry():
    def fn(x, n):
        handler = REGISTRY.get(type(n))
        missing = REGISTRY.get(str, None)
        return x * handler(n), missing is None, type(n) in REGISTRY, REGISTRY[float](1.5)
    c = kiln.compile(fn, backend="eager")
    x = torch.randn(3)
    assert_same(c(x, 3), fn(x, 3))
    assert stats() == (1, 0, 0)
    REGISTRY[int] = lambda v: v - 1  # the entry read changed: recompiles
    try:
        assert_same(c(x, 3), fn(x, 3))
        assert stats()[0] == 2
    finally:
        REGISTRY[int] = lambda v: v + 1


# ---------------------------------------------------------------- a new object's __dict__

class Plain:
    pass


def test_filling_and_deleting_attributes_of_a_new_object():
    def fn(x):
        p = Plain()
        vars(p).update({"a": 2, "b": 3})
        p.__dict__["c"] = 4
        del p.b
        delattr(p, "c")
        p.c = 5
        return x * (p.a + p.c), sorted(vars(p)), hasattr(p, "b")
    check(fn, x1)


# ---------------------------------------------------------------- config-like classes

class MappedConfig:
    attribute_map = {"hidden": "width"}

    def __init__(self):
        self.width = 8
        self.decoder_layers = 3
        self.name = "cfg"

    def __setattr__(self, key, value):
        if key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        super().__setattr__(key, value)

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)


MAPPED = MappedConfig()


def test_copied_config_with_attribute_map_setattr_and_delattr():
    def fn(x):
        c = copy.deepcopy(MAPPED)
        value = getattr(c, "decoder_layers")
        delattr(c, "decoder_layers")
        setattr(c, "layers", value)
        c.hidden = c.hidden * 2
        del c.name
        return (x * c.width + c.layers, hasattr(c, "hidden"), hasattr(c, "decoder_layers"), hasattr(c, "name"),
                sorted(vars(c)), MAPPED.width)
    check(fn, x1)


# ---------------------------------------------------------------- dict subclasses passed in

class Output(OrderedDict):
    def __getitem__(self, k):
        if isinstance(k, str):
            return dict(self.items())[k]
        return tuple(self[k] for k in self.keys())[k]


def test_a_dict_subclass_instance_passed_in_is_read_through_its_contents():
    def fn(o):
        total = o[0] * 2 + o["b"]
        return total, len(o), "a" in o, list(o.keys()), [v.sum() for v in o.values()], [k for k in o]
    c = kiln.compile(fn, backend="eager")
    for _ in range(2):
        o = Output(a=torch.randn(3), b=torch.randn(3))
        assert_same(c(o), fn(o))
    assert stats() == (1, 0, 0)
    o = Output(a=torch.randn(3), b=torch.randn(3))
    o.move_to_end("a")  # the same keys in another order: the keys guard sees the OrderedDict's order
    assert_same(c(o), fn(o))
    assert stats() == (2, 0, 1)


def test_mutating_a_dict_subclass_instance_passed_in_is_not_traced():
    def fn(o, x):
        o["c"] = x  # a builtin __setitem__ on the frame's object: runs eagerly
        return x + 1
    o, e = Output(a=1), Output(a=1)
    x = torch.randn(2)
    assert_same(kiln.compile(fn, backend="eager")(o, x), fn(e, x))
    assert list(o.keys()) == list(e.keys()) == ["a", "c"]
