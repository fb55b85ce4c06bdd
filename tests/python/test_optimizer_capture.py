"""Optimizer steps inside compiled functions: torch.optim's update (its functional adam/sgd/...) is
captured as a graph of its own and compiled, as Dynamo captures it, and a whole training step
(zero_grad, forward, backward, step) matches eager over 20 steps."""
import copy

import pytest
import torch
import torch.nn as nn

import kiln
from conftest import assert_same
from kiln import _codegen


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 4))


OPTIMIZERS = {
    "sgd_momentum": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=1e-4),
    "adam": lambda p: torch.optim.Adam(p, lr=1e-2),
    "adamw": lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.1),
    "rmsprop": lambda p: torch.optim.RMSprop(p, lr=1e-2),
}


def _train_step(model, opt, x, y):
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_training_step_with_optimizer_matches_eager_over_20_steps(name):
    m_eager, m_kiln = _model(), _model()
    o_eager, o_kiln = OPTIMIZERS[name](m_eager.parameters()), OPTIMIZERS[name](m_kiln.parameters())
    step = kiln.compile(_train_step)
    torch.manual_seed(1)
    for _ in range(20):
        x, y = torch.randn(8, 16), torch.randn(8, 4)
        assert_same(step(m_kiln, o_kiln, x, y), _train_step(m_eager, o_eager, x, y), rtol=1e-4, atol=1e-5)
    for a, b in zip(m_kiln.parameters(), m_eager.parameters()):
        assert_same(a.detach(), b.detach(), rtol=1e-4, atol=1e-5)
    for sa, sb in zip(o_kiln.state.values(), o_eager.state.values()):
        for k in sb:
            assert_same(sa[k], sb[k], rtol=1e-4, atol=1e-5)
    # The update itself is a captured graph (torch/optim code, with ops) that the code generator built.
    records = [r for r in kiln.stats()["graph_records"] if "/torch/optim/" in r["function"] and r["ops"] > 0]
    assert records, [r["function"] for r in kiln.stats()["graph_records"]]
    assert all(g.status == "compiled" or g.training_status for g in _codegen.GRAPHS), [g.status for g in _codegen.GRAPHS]


def test_addcdiv_with_a_tensor_value_is_captured():
    def f(p, a, b, s):
        q = p.clone()
        q.addcdiv_(a, b, value=-s)
        return q.addcmul(a, b, value=s * 2)

    c = kiln.compile(f)
    args = (torch.randn(5, 3), torch.randn(5, 3), torch.rand(5, 3) + 0.5, torch.tensor(0.3))
    assert_same(c(*args), f(*args), rtol=1e-6, atol=1e-6)
    s = kiln.stats()
    assert s["graphs"] == 1 and s["graph_breaks"] == 0, s["breaks"]


def test_lr_scheduler_step_in_a_compiled_function():
    m_eager, m_kiln = _model(), _model()
    o_eager, o_kiln = torch.optim.SGD(m_eager.parameters(), lr=0.1), torch.optim.SGD(m_kiln.parameters(), lr=0.1)
    s_eager = torch.optim.lr_scheduler.StepLR(o_eager, step_size=2, gamma=0.5)
    s_kiln = torch.optim.lr_scheduler.StepLR(o_kiln, step_size=2, gamma=0.5)

    def step(model, opt, sched, x):
        loss = _train_step(model, opt, x, torch.zeros(8, 4))
        sched.step()
        return loss

    c = kiln.compile(step)
    for _ in range(6):
        x = torch.randn(8, 16)
        assert_same(c(m_kiln, o_kiln, s_kiln, x), step(m_eager, o_eager, s_eager, x), rtol=1e-4, atol=1e-5)
    assert o_kiln.param_groups[0]["lr"] == o_eager.param_groups[0]["lr"] == 0.1 * 0.5 ** 3
    for a, b in zip(m_kiln.parameters(), m_eager.parameters()):
        assert_same(a.detach(), b.detach(), rtol=1e-4, atol=1e-5)


def test_in_place_update_of_a_parameter_under_no_grad_is_traced_on_the_cpu():
    # Functionalization's meta-device checks of in-place ops on tensors that require grad are not
    # part of the traced graph (they made it "not on a known device" and run op by op).
    p = nn.Parameter(torch.randn(6, 4))
    g = torch.randn(6, 4)

    def f(p, g):
        p.lerp_(g, 0.1)
        p.mul_(0.5)
        return p.sum()

    ref = copy.deepcopy(p)
    c = kiln.compile(f)
    for _ in range(3):
        with torch.no_grad():  # as an optimizer's update runs
            out = c(p, g)
            ref.lerp_(g, 0.1).mul_(0.5)
        assert_same(p.detach(), ref.detach())
        assert torch.allclose(out, ref.sum())
    assert all(gr.status == "compiled" for gr in _codegen.GRAPHS), [gr.status for gr in _codegen.GRAPHS]
