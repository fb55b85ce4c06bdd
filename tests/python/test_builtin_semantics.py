"""Python semantics the interpreter must keep exactly, each once silently wrong: builtins'
keyword arguments and dict views that follow later changes to their dict."""
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
