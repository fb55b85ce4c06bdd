"""Modules built inside the compiled function: nn.Parameter construction (made before each run,
written by the graph), sets of objects and tensors (identity membership), class statements, and
tensor.grad_fn / is_leaf known at capture time. Each is captured without a graph break and
compared with eager (values, requires_grad, gradients, aliasing)."""
import torch
import torch.nn as nn

import kiln
from conftest import assert_same, check


def fill(module):
    with torch.no_grad():
        for i, p in enumerate(module.parameters()):
            p.copy_(torch.linspace(-0.1 * (i + 1), 0.1 * (i + 1), p.numel()).view_as(p))
    return module


def linear_in_forward(x):
    return fill(nn.Linear(x.shape[-1], 3))(x).relu()


def test_linear_built_in_forward_is_one_graph():
    check(linear_in_forward, lambda: [torch.randn(4, 8)])


def test_linear_built_in_forward_under_no_grad_runs_generated_code():
    def f(x):
        with torch.no_grad():
            return nn.Sequential(fill(nn.Linear(8, 8)), nn.GELU(), fill(nn.LayerNorm(8)))(x) * 2

    check(f, lambda: [torch.randn(4, 8)])
    statuses = [c["status"] for c in kiln.stats()["codegen"]]
    assert statuses == ["compiled"], statuses


def test_parameters_made_in_forward_get_gradients_and_are_new_each_call():
    def f(x, keep):
        lin = fill(nn.Linear(8, 2))
        keep.append(lin)
        return (lin(x) ** 2).sum()

    compiled = kiln.compile(f)
    x = torch.randn(3, 8, requires_grad=True)
    seen = []
    for fn in (f, compiled, compiled):
        keep = []
        xi = x.detach().clone().requires_grad_()
        loss = fn(xi, keep)
        loss.backward()
        (lin,) = keep
        assert type(lin.weight) is nn.Parameter and lin.weight.requires_grad and lin.weight.is_leaf
        seen.append((loss.detach(), xi.grad, lin.weight.detach().clone(), lin.weight.grad, lin.bias.grad, id(lin.weight)))
    for got in seen[1:]:
        for a, e in zip(got[:5], seen[0][:5]):
            torch.testing.assert_close(a, e)
    assert seen[1][5] != seen[2][5]  # each call makes its own Parameter
    s = kiln.stats()
    assert (s["graphs"], s["graph_breaks"]) == (1, 0), s["breaks"]


def test_parameter_shares_memory_with_its_data():
    def f(x):
        t = torch.zeros(4)
        p = nn.Parameter(t, requires_grad=False)
        t.add_(1.5)  # eager: the Parameter sees this write (they share memory)
        p.mul_(2)    # ... and t sees this one
        return x * p, t.clone()

    check(f, lambda: [torch.randn(4)])


def test_parameter_of_an_input_keeps_eager_aliasing():
    def f(x):
        p = nn.Parameter(x)
        with torch.no_grad():
            p.add_(1)  # writes the caller's tensor too
        return p * 2

    compiled = kiln.compile(f)
    for fn in (f, compiled):
        x = torch.ones(3)
        out = fn(x)
        assert torch.equal(x, torch.full((3,), 2.0))
        assert out.requires_grad


class Node:
    def __init__(self, value):
        self.value = value


def test_sets_of_new_objects_and_tensors_test_identity():
    def f(x):
        seen = set()
        a, b = Node(x * 2), Node(x * 2)
        y = x + 1
        seen.add(a)
        seen.add(y)
        seen.add(a)
        out = x
        for n in (a, b):
            if n not in seen:
                out = out + n.value
        seen.discard(y)
        return out, len(seen), y in seen, a in seen

    check(f, lambda: [torch.randn(3)])


def test_set_of_new_objects_handed_back_runs_eagerly_and_correctly():
    def f(x):
        s = {1}
        s.add(Node(x))
        return x + 1, len(s)

    compiled = kiln.compile(f)
    x = torch.randn(2)
    assert_same(compiled(x), f(x))


def test_class_statement_inside_the_function():
    def f(x):
        class Scale(nn.Module):
            def __init__(self, s):
                super().__init__()
                self.s = s

            def forward(self, t):
                return t * self.s

        return Scale(3.0)(x) + Scale(0.5)(x)

    check(f, lambda: [torch.randn(5)])


def test_class_body_that_calls_code_breaks_and_stays_correct():
    def f(x):
        class Helper:
            @staticmethod
            def twice(t):
                return t * 2

        return Helper.twice(x) + 1

    check(f, lambda: [torch.randn(3)], graphs=None, breaks=None)


def test_grad_fn_and_is_leaf_known_at_capture():
    def f(x, w):
        y = x * 2
        z = w * 2
        with torch.no_grad():
            n = w + 1
        return (y * 1, y.grad_fn is None, y.is_leaf, z.grad_fn is not None, z.is_leaf, n.grad_fn is None, n.is_leaf,
                x.grad_fn is None)

    check(f, lambda: [torch.randn(3), torch.randn(3, requires_grad=True)], graphs=None, breaks=None)
