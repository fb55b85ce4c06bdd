"""torch.Generator objects in compiled functions: a generator the function reaches (a global) is
the graph's own, advancing as in eager; one made during the call is never a graph constant."""
import torch

import kiln

G = torch.Generator().manual_seed(5)


def test_a_global_generator_draws_as_in_eager():
    # Its repr (`<torch._C.Generator object at 0x...>`) was written into the graph's Python code,
    # and building the graph module raised a SyntaxError at the caller.
    def f(x):
        return x + torch.randn(x.shape, generator=G)

    kiln.reset()
    compiled = kiln.compile(f)
    x = torch.randn(4, 8)
    G.manual_seed(5)
    got = [compiled(x) for _ in range(3)]
    G.manual_seed(5)
    want = [f(x) for _ in range(3)]
    assert all(torch.equal(a, b) for a, b in zip(got, want))
    assert kiln.stats()["graphs"] == 1 and kiln.stats()["graph_breaks"] == 0


def test_a_generator_made_in_the_call_is_made_in_every_call():
    def f(x):
        return x + torch.randn(x.shape, generator=torch.Generator().manual_seed(3))

    kiln.reset()
    compiled = kiln.compile(f)
    x = torch.randn(4, 8)
    for _ in range(3):
        assert torch.equal(compiled(x), f(x))
