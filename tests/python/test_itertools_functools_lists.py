"""functools.reduce, itertools.combinations/permutations/zip_longest/repeat, namedtuple._replace
and unpacking a namedtuple passed in, list slice assignment and del of a slice: captured."""
import functools
import itertools
import operator
from collections import namedtuple

import torch

import kiln
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


def test_itertools_count_and_unbounded_repeat_in_zip():
    def fn(x):
        out = x
        for k, s in zip(itertools.count(1), itertools.repeat(0.5, 3)):
            out = out * s + k
        c = itertools.count(10, 2)
        pairs = list(zip(c, [x, x * 2]))  # pulls 10, 12 and 14 (dropped): next(c) is 16
        r = itertools.repeat(3)
        return out, pairs[1][1] * pairs[1][0], next(c), next(r) * x
    check(fn, x1)


def test_returned_count_is_a_copy_per_call():
    def fn(x):
        c = itertools.count(5)
        next(c)
        return x + 1, c
    compiled = kiln.compile(fn)
    _, c1 = compiled(torch.randn(2))
    assert next(c1) == 6 and next(c1) == 7
    _, c2 = compiled(torch.randn(2))
    assert next(c2) == 6


def test_zip_advances_an_iterator_only_as_far_as_python():
    def fn(xs):
        it = iter(xs)
        first = list(zip([1], it))
        rest = list(it)
        return first[0][1] * first[0][0], rest
    check(fn, xlist)
