"""Unsupported constructs: the frame runs eagerly with the reason and the user's file:line
recorded; fullgraph=True raises instead; user exceptions surface exactly as in eager."""
import traceback

import pytest
import torch

import kiln
from conftest import assert_same, check

LOG = []


def uses_print(x):
    print("hello from eager")
    return x * 2


def data_dependent_branch(x):
    if x.sum() > 0:
        return x * 2
    return x - 1


def item_call(x):
    return x * x.sum().item()


def mutates_global(x):
    LOG.append(1)
    return x + 1


class Obj:
    pass


def sets_attribute(x, o):
    o.value = 3
    return x + o.value


def raises_value_error(x):
    if x.dim() == 2:
        raise ValueError("bad input shape")
    return x


def shape_error(x):
    return x @ torch.ones(3, 3)


def generator_user(x):
    def gen():
        yield x
        yield x * 2
    return sum(gen())


def calls_broken_helper(x):
    return helper_with_print(x) * 3


def helper_with_print(x):
    print("inside helper")
    return x + 1


@pytest.mark.parametrize("fn,needle", [
    (uses_print, "print()"),
    (data_dependent_branch, "data-dependent"),
    (item_call, "item"),
])
def test_fallback_runs_eagerly_with_reason(fn, needle, capsys):
    x = torch.randn(4, 4)
    compiled = kiln.compile(fn)
    assert_same(compiled(x.clone()), fn(x.clone()))
    s = kiln.stats()
    assert s["graph_breaks"] == 1
    b = s["breaks"][0]
    assert needle in b["reason"], b
    assert b["where"].startswith(__file__), b
    line = int(b["where"].rsplit(":", 1)[1])
    src = open(__file__).read().splitlines()[line - 1]
    assert src.strip(), src
    # second call: the cached entry (its graphs and its break) is reused, no new break
    compiled(x.clone())
    assert kiln.stats()["graph_breaks"] == 1


def test_mutation_of_a_global_list_is_replayed_once_per_call():
    LOG.clear()
    compiled = kiln.compile(mutates_global)
    for i in range(3):
        assert_same(compiled(torch.ones(2)), torch.full((2,), 2.0))
        assert LOG == [1] * (i + 1)
    assert kiln.stats()["graph_breaks"] == 0


def test_fallback_line_points_at_user_code():
    compiled = kiln.compile(uses_print)
    compiled(torch.randn(2))
    where = kiln.stats()["breaks"][0]["where"]
    line = int(where.rsplit(":", 1)[1])
    assert "print(" in open(__file__).read().splitlines()[line - 1]


def test_attribute_mutation_is_replayed():
    o = Obj()
    compiled = kiln.compile(sets_attribute)
    out = compiled(torch.ones(2), o)
    assert o.value == 3
    assert torch.equal(out, torch.full((2,), 4.0))
    assert kiln.stats()["graph_breaks"] == 0
    del o.value  # the cached graph replays the assignment on the next call too
    compiled(torch.ones(2), o)
    assert o.value == 3 and kiln.stats()["frames_compiled"] == 1


class Guarded:
    def __setattr__(self, name, value):
        object.__setattr__(self, name, value * 2)


def test_attribute_mutation_with_custom_setattr_falls_back():
    o = Guarded()
    out = kiln.compile(sets_attribute)(torch.ones(2), o)
    assert o.value == 6 and torch.equal(out, torch.full((2,), 7.0))
    assert "__setattr__" in kiln.stats()["breaks"][0]["reason"]


def test_graph_break_splits_the_frame_and_resumes():
    # the print runs eagerly between two graphs: the code before it and a resume function
    def caller(x):
        y = x * 2
        print("caller prints")
        return inner_ok(y)
    compiled = kiln.compile(caller)
    x = torch.randn(3)
    assert_same(compiled(x), caller(x))
    s = kiln.stats()
    assert s["graph_breaks"] == 1
    assert s["graphs"] == 2
    assert "caller" in s["graph_records"][0]["function"]
    assert "__resume_at_" in s["graph_records"][1]["function"]


def test_called_functions_get_their_own_chance():
    # a break inside a loop makes the caller run eagerly (as Dynamo does); the functions it
    # calls are offered to kiln separately
    def caller(x):
        for _ in range(2):
            print("caller prints")
            x = inner_ok(x)
        return x
    compiled = kiln.compile(caller)
    x = torch.randn(3)
    assert_same(compiled(x), caller(x))
    s = kiln.stats()
    assert s["graph_breaks"] == 1
    assert s["graphs"] == 1  # inner_ok was captured by itself
    assert "inner_ok" in s["graph_records"][0]["function"]


def inner_ok(t):
    return t.relu() + 1


def test_fullgraph_raises_clear_error():
    compiled = kiln.compile(uses_print, fullgraph=True)
    with pytest.raises(kiln.Unsupported) as ei:
        compiled(torch.randn(2))
    msg = str(ei.value)
    assert "print()" in msg and __file__ in msg and "uses_print" in msg


def test_fullgraph_ok_program():
    check(lambda x: x.sin() + 1, lambda: (torch.randn(3),), fullgraph=True)


def test_user_exception_surfaces_exactly():
    x = torch.randn(2, 2)
    with pytest.raises(ValueError) as eager:
        raises_value_error(x)
    compiled = kiln.compile(raises_value_error)
    with pytest.raises(ValueError) as comp:
        compiled(x)
    assert str(comp.value) == str(eager.value) == "bad input shape"
    frames = [f for f in traceback.extract_tb(comp.value.__traceback__) if f.filename == __file__]
    assert frames and frames[-1].name == "raises_value_error" and "raise ValueError" in frames[-1].line


def test_shape_error_surfaces_as_in_eager():
    x = torch.randn(2, 4)
    with pytest.raises(RuntimeError) as eager:
        shape_error(x)
    with pytest.raises(RuntimeError) as comp:
        kiln.compile(shape_error)(x)
    assert str(comp.value) == str(eager.value)
    frames = [f for f in traceback.extract_tb(comp.value.__traceback__) if f.filename == __file__]
    assert frames[-1].name == "shape_error"


def test_inlined_generator_function():
    check(generator_user, lambda: (torch.randn(3),))


def test_generator_frames_are_not_entered():
    def gen(x):
        yield x * 2
        yield x * 3
    compiled = kiln.compile(gen)
    x = torch.randn(2)
    out = list(compiled(x))
    assert torch.equal(out[0], x * 2) and torch.equal(out[1], x * 3)
    assert kiln.stats()["graphs"] == 0


def test_unsupported_python_is_recorded_not_crashing():
    def uses_set(x):
        s = {1, 2}
        return x * len(s)
    def uses_try(x):
        try:
            return x * 2
        finally:
            pass
    for fn in (uses_set, uses_try):
        kiln.reset()
        x = torch.randn(3)
        assert_same(kiln.compile(fn)(x), fn(x))


def test_graph_break_log_names_reason_and_line(capfd):
    kiln._options.set("logs", "graph_breaks")
    try:
        kiln.compile(uses_print)(torch.randn(2))
    finally:
        kiln._options.unset("logs")
    err = capfd.readouterr().err
    assert "[kiln:graph_breaks] graph break in uses_print" in err
    assert "print() is a side effect" in err and __file__ + ":" in err


def test_large_unrolled_function_is_one_graph():
    # 5,000 tensor operations from an unrolled loop (the capture-speed benchmark's shape)
    def fn(x, w):
        for i in range(1000):
            x = torch.tanh(x * w + 0.5)
            x = x - 0.001 * i
            x = x.relu()
        return x
    x, w = torch.randn(8, 8), torch.randn(8)
    out = kiln.compile(fn, fullgraph=True)(x, w)
    torch.testing.assert_close(out, fn(x, w))
    rec = kiln.stats()["graph_records"][0]
    assert rec["ops"] == 5000
    # repeated operator signatures reuse shape propagation (only `x - 0.001 * i` varies)
    assert rec["meta_hits"] >= 3000 and rec["meta_misses"] <= 1100
