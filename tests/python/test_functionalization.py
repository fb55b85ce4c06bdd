"""Functionalization at the tracer (issue 11, item 2), Python in, ATen graph out: in-place operators
and writes through views become functional operators (a write through a view is a *_scatter of
its base), writes to graph inputs become `mutates input` epilogues, and the graph's own
operators are all out of place."""
import torch

import kiln
from kiln import _C


def graph_of(fn, *inputs):
    text, _ = _C._trace(fn, list(inputs))
    return text


def ops(text):
    return [line.split(" = ", 1)[1].split("(", 1)[0] for line in text.splitlines() if " = aten::" in line]


def test_in_place_operators_and_writes_through_views_become_functional():
    def f(x, y):
        t = x * 2
        t.add_(y)
        t[0].mul_(3)
        return t
    text = graph_of(f, torch.randn(3, 4), torch.randn(3, 4))
    assert not any(op.endswith("_") for op in ops(text)), text  # no in-place operator is left
    assert "aten::add.Tensor" in ops(text) and "aten::select_scatter" in ops(text), text
    assert "mutates input" not in text, text  # only a temporary was written


def test_writes_to_inputs_become_copy_back_epilogues():
    def f(x, y):
        x.add_(1)
        y[1].zero_()
        return x * 2
    text = graph_of(f, torch.randn(3, 4), torch.randn(3, 4))
    lines = text.splitlines()
    assert any(line.startswith("mutates input 0 := %") for line in lines), text
    assert any(line.startswith("mutates input 1 := %") for line in lines), text
    assert "aten::select_scatter" in ops(text), text


def test_outputs_that_view_inputs_are_views_in_the_graph_and_in_the_result():
    def f(x):
        return x.view(12), x.t()
    x = torch.randn(3, 4)
    text, outs = _C._trace(f, [x])
    assert ops(text) == ["aten::view", "aten::t"], text
    compiled = kiln.compile(f)
    compiled(x)
    a, b = compiled(x)
    assert a.data_ptr() == x.data_ptr() and b.data_ptr() == x.data_ptr()  # the caller sees eager's aliasing
    b[0, 0] = 5.0
    assert x[0, 0].item() == 5.0
