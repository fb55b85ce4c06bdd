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
