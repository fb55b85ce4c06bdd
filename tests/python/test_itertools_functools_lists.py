"""functools.reduce, itertools.combinations/permutations/zip_longest/repeat, namedtuple._replace
and unpacking a namedtuple passed in, list slice assignment and del of a slice: captured."""
import functools
import itertools
import operator
from collections import namedtuple

import torch

from conftest import check

Pair = namedtuple("Pair", ["left", "right"])


def x1():
    return (torch.randn(4, 8),)


def xlist():
    return ([torch.randn(4) for _ in range(3)],)


def test_functools_reduce():
    def fn(xs):
        return functools.reduce(operator.add, xs), functools.reduce(lambda acc, t: acc * 0.5 + t, xs, torch.zeros(4))
    check(fn, xlist)


def test_itertools_combinations_permutations():
    def fn(x):
        a = sum(x[i] * x[j] for i, j in itertools.combinations(range(4), 2))
        b = [x[i] - x[j] for i, j in itertools.permutations(range(3), 2)]
        return a, torch.stack(b), list(itertools.combinations("abc", 2))
    check(fn, x1)


def test_itertools_zip_longest_and_repeat():
    def fn(xs):
        out = []
        for a, b in itertools.zip_longest(xs, [1.0, 2.0], fillvalue=0.5):
            out.append(a * b)
        for t, s in zip(xs, itertools.repeat(3.0, 2)):
            out.append(t * s)
        return out
    check(fn, xlist)


def test_namedtuple_replace_and_fields():
    def fn(x, y):
        p = Pair(x, y)
        q = p._replace(right=y * 3)
        return q, q._fields
    check(fn, lambda: (torch.randn(4), torch.randn(4)))


def test_namedtuple_input_unpack():
    def fn(p):
        a, b = p
        return a * b + p[0]
    check(fn, lambda: (Pair(torch.randn(4), torch.randn(4)),))


def test_list_slice_assignment_and_del():
    def fn(xs):
        ys = list(xs)
        ys[1:2] = [xs[1] * 2, xs[1] * 3]
        zs = [0, 1, 2]
        zs[:] = [t + 1 for t in xs]
        ws = list(xs)
        ws[::2] = [xs[0] * 0, xs[2] * 0]
        vs = list(xs) + list(xs)
        del vs[::2]
        del vs[:1]
        return ys, zs, ws, vs
    check(fn, xlist)
