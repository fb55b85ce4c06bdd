"""nn.Module instances a frame is given are guarded by their type and by what the capture reads of
them (attributes by value, parameters and buffers as graph inputs fetched from the instance,
hook dicts empty, forward not replaced on the instance), not by identity. So the twelve layers of
a model whose forward has a graph break share one compiled entry instead of compiling once per
instance until the recompile limit, and modules built anew by every call hit the cache."""
import torch
import torch.nn as nn

import kiln


class Block(nn.Module):
    def __init__(self, scale=1.0):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.ln = nn.LayerNorm(8)
        self.scale = scale

    def forward(self, x):
        y = self.lin(x).relu() * self.scale
        print("", end="")  # a graph break inside the layer
        return self.ln(y + x)


class Net(nn.Module):
    def __init__(self, n=12, scales=None):
        super().__init__()
        self.blocks = nn.ModuleList([Block(1.0 if scales is None else scales[i]) for i in range(n)])

    def forward(self, x):
        for b in self.blocks:  # a break inside the loop: this frame runs eagerly, each block's is compiled
            x = b(x)
        return x


def test_layers_of_one_class_share_one_compiled_entry():
    m = Net()
    c = kiln.compile(m)
    with torch.no_grad():
        for _ in range(3):
            x = torch.randn(4, 8)
            torch.testing.assert_close(c(x), m(x))
    s = kiln.stats()
    assert s["recompiles"] == 0 and s["recompile_limit_hits"] == 0, s
    assert s["graphs"] <= 3, s  # Block.forward and its resume function, not one per instance


def test_each_instance_uses_its_own_parameters_and_attributes():
    m = Net(n=4, scales=[1.0, 2.0, 0.5, 2.0])
    c = kiln.compile(m)
    with torch.no_grad():
        x = torch.randn(4, 8)
        torch.testing.assert_close(c(x), m(x))
        m.blocks[1].lin.weight.mul_(-1)  # new values in place: read at run time
        m.blocks[3].scale = 3.0          # a new attribute value: guarded
        x = torch.randn(4, 8)
        torch.testing.assert_close(c(x), m(x))


def test_a_hook_on_one_instance_runs():
    m = Net(n=3)
    c = kiln.compile(m)
    seen = []
    with torch.no_grad():
        x = torch.randn(4, 8)
        c(x)
        m.blocks[2].register_forward_hook(lambda mod, args, out: seen.append(out.shape) or out * 2)
        torch.testing.assert_close(c(x), m(x))
    assert len(seen) == 2


def test_a_forward_replaced_on_one_instance_is_called():
    m = Net(n=3)
    c = kiln.compile(m)
    with torch.no_grad():
        x = torch.randn(4, 8)
        c(x)
        m.blocks[1].forward = lambda t: t - 1
        torch.testing.assert_close(c(x), m(x))


def test_train_and_eval_instances_differ():
    class Drop(nn.Module):
        def __init__(self):
            super().__init__()
            self.d = nn.Dropout(0.5)

        def forward(self, x):
            return self.d(x) + 1

    a, b = Drop(), Drop().eval()
    f = kiln.compile(lambda mod, x: mod(x))
    x = torch.ones(1000)
    assert (f(a, x) == 1).any()        # training: some elements dropped
    torch.testing.assert_close(f(b, x), x + 1)  # eval: none


def test_modules_built_by_every_call_hit_the_cache():
    def g(x):
        net = nn.Sequential(nn.LayerNorm(8), nn.GELU(), nn.Dropout(0.0))
        return net(x) * 2

    c = kiln.compile(g)
    for _ in range(4):
        x = torch.randn(4, 8)
        torch.testing.assert_close(c(x), g(x))
    before = kiln.stats()
    for _ in range(4):
        x = torch.randn(4, 8)
        torch.testing.assert_close(c(x), g(x))
    after = kiln.stats()
    # steady state: no new captures (Sequential.__init__'s own frame still needs identity, and
    # stays at its limit, running eagerly)
    assert after["frames_compiled"] == before["frames_compiled"], (before, after)
    assert after["recompiles"] == before["recompiles"], (before, after)


def test_training_through_shared_entries_gives_each_instance_its_gradients():
    m = Net(n=3)
    ref = Net(n=3)
    ref.load_state_dict(m.state_dict())
    c = kiln.compile(m)
    x = torch.randn(4, 8)
    c(x).sum().backward()
    ref(x).sum().backward()
    for (n, p), q in zip(m.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, msg=n)


# ---- modules built inside the compiled function ---------------------------------------------------
class Scaled(nn.Module):
    def __init__(self, k):
        super().__init__()
        self.k = k
        self.act = nn.GELU(approximate="tanh")

    def forward(self, x):
        return self.act(x) * self.k


def test_stateless_modules_built_inside_are_captured_in_one_graph():
    def f(x):
        y = nn.ReLU()(x) + nn.Softmax(dim=-1)(x)
        y = nn.LayerNorm(x.shape[-1], elementwise_affine=False)(y)
        y = nn.Sequential(nn.GELU(), nn.Dropout(0.0), nn.Identity(), nn.Flatten(0))(y)
        return Scaled(3.0)(y)

    c = kiln.compile(f)
    for _ in range(3):
        x = torch.randn(4, 8)
        torch.testing.assert_close(c(x), f(x))
    s = kiln.stats()
    assert s["graphs"] == 1 and s["graph_breaks"] == 0, [b["reason"] for b in s["breaks"]]
    assert s["recompiles"] == 0, s


def test_a_module_built_inside_in_training_mode_draws_dropout_as_eager():
    def f(x):
        return nn.Dropout(0.5)(x) + 1

    c = kiln.compile(f)
    x = torch.ones(64, 64)
    for seed in (7, 8):
        torch.manual_seed(seed)
        want = f(x)
        torch.manual_seed(seed)
        got = c(x)
        assert torch.equal(got, want)  # the same draws from the same generator state
    assert kiln.stats()["graph_breaks"] == 0


def test_a_global_module_hook_registered_later_runs():
    def f(x):
        return nn.ReLU()(x) * 2

    c = kiln.compile(f)
    x = torch.randn(8)
    torch.testing.assert_close(c(x), f(x))
    seen = []
    h = nn.modules.module.register_module_forward_hook(lambda m, a, o: seen.append(type(m).__name__))
    try:
        torch.testing.assert_close(c(x), f(x))
    finally:
        h.remove()
    assert seen == ["ReLU", "ReLU"], seen
