"""Python semantics the interpreter must keep exactly, each once silently wrong: builtins'
keyword arguments and dict views that follow later changes to their dict."""
import collections

import torch

from conftest import check


def x2():
    return (torch.randn(4), torch.randn(4))


def test_sum_with_start_keyword():
    check(lambda a, b: sum([a, b], start=a * 10), x2)


def test_sum_with_start_positional():
    check(lambda a, b: sum((a, b, b), a), x2)


def test_dict_views_see_items_added_after_they_were_taken():
    def fn(a, b):
        d = {"a": a}
        keys, values, items = d.keys(), d.values(), d.items()
        d["b"] = b
        d["a"] = a * 3
        out = [v + 1 for v in values] + [v for _, v in items]
        return out, len(keys), "b" in keys, [k for k in keys]
    check(fn, x2)


def test_dict_view_sees_removal_and_truthiness():
    def fn(a, b):
        d = {"a": a, "b": b}
        vals = d.values()
        d.pop("a")
        r = a * 0
        if vals:
            r = r + sum(vals)
        del d["b"]
        return r * 2 if not vals else r
    check(fn, x2)


def test_sizes_whose_python_hashes_collide_are_not_confused():
    # hash(-1) == hash(-2): the shape-propagation memo once keyed on hashes alone
    check(lambda x: x.view(x.size(-1), x.size(-2), -1) * 2, lambda: (torch.randn(2, 6, 4),))


def test_tensor_type_and_get_device_describe_the_real_tensor():
    check(lambda x: (x * 2, x.type(), x.long().type(), x.get_device()), lambda: (torch.randn(3),))


def test_membership_in_dict_items():
    check(lambda x: (x + 1, ("a", 1) in {"a": 1}.items(), ("a", 2) in {"a": 1}.items(), 5 in {"a": 1}.items()),
          lambda: (torch.randn(3),))


def test_next_on_a_generator_advances_it():
    def gen(t):
        yield t
        yield t * 2
        yield t * 3

    def fn(x):
        g = gen(x)
        first = next(g)
        return first, next(g), list(g)
    check(fn, lambda: (torch.randn(3),))


def test_repr_of_a_tensor_is_not_taken_from_its_meta_tensor():
    def fn(x):
        return x + 1, f"{x}", str(x.shape)
    check(fn, lambda: (torch.randn(3),), graphs=None, breaks=None)


def test_dict_constructor_from_pairs_views_and_keywords():
    def fn(x):
        d = {"a": x, "b": x * 2}
        e = dict(d.items())
        f = dict(zip(["p", "q"], [x + 1, x + 2]), q=x * 5)
        g = dict([("k", x), ("k", x - 1)])
        return e, f, g
    check(fn, lambda: (torch.randn(3),))


def test_sorting_filtering_itertools_namedtuples_and_string_methods_are_captured():
    import collections
    import itertools
    Pair = collections.namedtuple("Pair", ["a", "b"], defaults=[0])

    def fn(x):
        xs = [x * 3, x, x * 2]
        order = sorted(range(3), key=lambda i: -i)
        names = sorted(["b", "a", "c"], reverse=True)
        best = max(["aa", "b", "ccc", "ddd"], key=len)  # the first of the longest
        evens = list(filter(lambda v: v % 2 == 0, range(6)))
        chained = list(itertools.chain([1, 2], (3,)))
        pairs = list(itertools.product([1, 2], ["x"]))
        running = list(itertools.accumulate([1, 2, 3]))
        p, q = Pair(x, b=x + 1), Pair(x)
        d = dict.fromkeys(["k", "m"], 1)
        size = torch.Size([2, len(names)])
        joined = ", ".join(names)
        ys = list(xs)
        ys.sort(key=lambda t: 0)  # stable: order kept
        return xs[order[0]], names, best, evens, chained, pairs, running, p.b + q.a, q.b, d, size, joined, ys, p
    check(fn, lambda: (torch.randn(3),), graphs=1, breaks=0)


_Pair = collections.namedtuple("_Pair", "a b")


def test_tuple_new_of_a_namedtuple_class():
    # A namedtuple's generated __new__ is `lambda _cls, a, b: tuple.__new__(_cls, (a, b))`; it
    # runs when library code (a tensor's repr, at a print break) makes one: captured, not a break.
    def f(x):
        p = tuple.__new__(_Pair, (x, x * 2))
        q = _Pair.__new__(_Pair, x + 1, 3)
        return p.a + p.b + q.a * q.b, type(p) is _Pair, len(tuple.__new__(tuple, [1, 2]))

    check(f, lambda: [torch.randn(3)])
