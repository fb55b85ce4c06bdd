"""with-statements over the program's own context manager classes (Python __enter__/__exit__):
inlined into the graph, side effects in order, exceptions seen by __exit__ (swallowed or not),
and graph breaks inside the block; compared with eager."""
import io

import torch

import kiln
from conftest import assert_same, check

LOG = []


class Tag:
    def __init__(self, name):
        self.name = name
        self.depth = 0

    def __enter__(self):
        LOG.append("enter " + self.name)
        self.depth += 1
        return self

    def __exit__(self, kind, value, tb):
        LOG.append("exit " + self.name)
        self.depth -= 1
        return False


class Suppress:
    def __init__(self, kind):
        self.kind = kind
        self.caught = None

    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        if kind is not None and issubclass(kind, self.kind):
            self.caught = str(value)
            return True
        return False


def run_both(fn, *args):
    LOG.clear()
    expected = fn(*args)
    eager_log = list(LOG)
    LOG.clear()
    actual = kiln.compile(fn)(*args)
    assert LOG == eager_log
    assert_same(actual, expected)


def test_new_context_manager_object_is_inlined():
    def f(x):
        with Tag("block") as t:
            y = x * (t.depth + 1)
        return y, t.depth

    run_both(f, torch.randn(3))
    s = kiln.stats()
    assert (s["graphs"], s["graph_breaks"]) == (1, 0), s["breaks"]


def test_context_manager_passed_in():
    def f(x, tag):
        with tag:
            y = x.relu() * 2
        return y

    tag = Tag("arg")
    run_both(f, torch.randn(4), tag)
    assert tag.depth == 0


def test_exit_swallows_an_exception_raised_in_the_block():
    def f(x):
        s = Suppress(KeyError)
        with s:
            y = x + 1
            {}["missing"]
        return y, s.caught

    run_both(f, torch.randn(2))


def test_exit_that_does_not_swallow_lets_the_exception_out():
    def f(x):
        with Tag("outer"):
            with Suppress(KeyError):
                raise ValueError("boom")
        return x

    compiled = kiln.compile(f)
    for fn in (f, compiled):
        LOG.clear()
        try:
            fn(torch.randn(2))
        except ValueError as e:
            assert str(e) == "boom"
        else:
            raise AssertionError("no exception")
        assert LOG == ["enter outer", "exit outer"]


def test_graph_break_inside_the_block():
    buf = io.StringIO()

    def f(x):
        with Tag("brk") as t:
            y = x * 2
            print("inside", t.depth, file=buf)
            y = y + 1
        return y, t.depth

    run_both(f, torch.randn(3))


import contextlib  # noqa: E402


@contextlib.contextmanager
def scaled(factor):
    LOG.append(f"enter {factor}")
    try:
        yield factor * 2
    finally:
        LOG.append(f"exit {factor}")


def test_contextmanager_function_is_captured_with_effects_in_order():
    def f(x):
        with scaled(3) as k:
            LOG.append("body")
            y = x * k
        return y + 1

    run_both(f, torch.randn(3))
    s = kiln.stats()
    assert (s["graphs"], s["graph_breaks"]) == (1, 0), s["breaks"]


def test_contextmanager_defined_inside_the_function():
    def f(x):
        @contextlib.contextmanager
        def tag(name):
            LOG.append("enter " + name)
            yield len(name)
            LOG.append("exit " + name)

        with tag("abc") as n:
            y = x * n
        with tag("de") as m:
            y = y - m
        return y

    run_both(f, torch.randn(4))
    s = kiln.stats()
    assert (s["graphs"], s["graph_breaks"]) == (1, 0), s["breaks"]


def test_exception_inside_a_contextmanager_block_matches_eager():
    @contextlib.contextmanager
    def swallow():
        try:
            yield
        except KeyError:
            LOG.append("swallowed")

    def f(x):
        with swallow():
            LOG.append("body")
            {}["k"]
        return x + 1

    run_both(f, torch.randn(2))


def test_graph_break_inside_a_contextmanager_block_matches_eager():
    buf = io.StringIO()

    def f(x):
        with scaled(2) as k:
            y = x * k
            print("inside", file=buf)
            y = y + 1
        return y

    run_both(f, torch.randn(3))
