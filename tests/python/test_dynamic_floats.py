"""Dynamic floats: a float argument that changes between calls (a temperature, a learning rate, a
mixing weight) becomes a graph input after its first change, instead of recompiling on every value
until the recompile limit (torch.compile's automatic dynamic floats)."""
import math
import random
import warnings

import pytest
import torch

import kiln
from conftest import assert_same

BACKENDS = ["eager", "aot_eager", "kiln"]


def run_values(fn, make_args, backend, calls=10, **kw):
    c = kiln.compile(fn, backend=backend, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no recompile-limit warning
        for _ in range(calls):
            args = make_args()
            assert_same(c(*args), fn(*args))
    return kiln.stats()


def temperature(logits, t):
    return (logits / t).softmax(-1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_changing_float_compiles_twice_not_per_value(backend):
    s = run_values(temperature, lambda: (torch.randn(4, 16), random.uniform(0.2, 2.0)), backend)
    assert s["graphs"] == 2 and s["recompiles"] == 1 and s["eager_runs"] == 0
    code = s["graph_records"][-1]["code"]
    assert "l_t_" in code and "f64[] (the float L['t'])" in code
    assert "a dynamic float" in s["graph_records"][-1]["guards"]
    if backend == "kiln":  # generated code, the float a kernel operand
        assert [g["status"] for g in s["codegen"]] == ["compiled", "compiled"], s["codegen"]


def mix(x, lr, alpha, t):
    keep = 1.0 - alpha
    y = x * keep + alpha * x.sin()
    return y - lr * math.sqrt(t) * x, lr * 2, alpha - 1, float(t) ** 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_arithmetic_on_floats_stays_in_the_graph_and_returns_floats(backend):
    s = run_values(mix, lambda: (torch.randn(32), random.random(), random.random(), random.random() + 0.1), backend)
    assert s["graphs"] == 2 and s["recompiles"] == 1
    guards = s["graph_records"][-1]["guards"]
    assert "L['t'] >= 0.0" in guards  # math.sqrt's domain, as a guard
    c = kiln.compile(mix, backend=backend)
    r = c(torch.randn(4), 0.25, 0.5, 4.0)
    assert all(type(v) is float for v in r[1:])


def promotions(xi, x0, xh, t):
    # A Python float does not promote an integer tensor to float64, nor a 0-d float32 tensor.
    return xi * t, x0 * t, xh * t, torch.where(xi > 0, xi, t), xi.sum() / t


@pytest.mark.parametrize("backend", BACKENDS)
def test_result_dtypes_are_those_a_python_float_gives(backend):
    def make():
        return (torch.randint(-5, 5, (6,)), torch.randn(()), torch.randn(8, dtype=torch.float16), random.uniform(0.5, 1.5))
    c = kiln.compile(promotions, backend=backend)
    for _ in range(4):
        args = make()
        assert_same(c(*args), promotions(*args), rtol=1e-3, atol=1e-3)
    assert kiln.stats()["graphs"] == 2


def branch(x, t):
    if t > 0.5:
        return x * t
    return x - t


@pytest.mark.parametrize("backend", ["eager", "kiln"])
def test_a_branch_on_a_float_guards_the_comparison_not_the_value(backend):
    s = run_values(branch, lambda: (torch.randn(5), random.random()), backend, calls=16)
    assert s["graphs"] <= 3 and s["eager_runs"] == 0
    assert any("L['t'] > 0.5" in r["guards"] for r in s["graph_records"])


def truncates(x, t):
    return x * int(t * 10)


def test_a_float_used_as_a_python_value_is_specialised_and_stays_so():
    c = kiln.compile(truncates)
    for t in [0.11, 0.25, 0.37, 0.25]:
        x = torch.randn(3)
        assert_same(c(x, t), truncates(x, t))
    s = kiln.stats()
    assert "L['t'] == 0.37" in s["graph_records"][-1]["guards"]  # pinned: later captures keep it a constant
    assert "a dynamic float" not in s["graph_records"][-1]["guards"]


def reciprocal(x, t):
    return x * (1.0 / t)


def root(x, t):
    return x * math.sqrt(t)


@pytest.mark.parametrize("backend", ["eager", "kiln"])
def test_python_errors_of_float_arithmetic_surface_as_in_eager(backend):
    c = kiln.compile(reciprocal, backend=backend)
    for t in [0.5, 0.25]:
        c(torch.randn(3), t)
    with pytest.raises(ZeroDivisionError):
        c(torch.randn(3), 0.0)
    x = torch.randn(3)
    assert_same(c(x, 4.0), reciprocal(x, 4.0))
    kiln.reset()
    c = kiln.compile(root, backend=backend)
    for t in [0.5, 0.25]:
        c(torch.randn(3), t)
    with pytest.raises(ValueError):
        c(torch.randn(3), -1.0)


def test_a_float_keyword_operand_is_specialised_and_correct():
    def f(x, lo):
        return torch.clamp(x, min=lo) * 2
    c = kiln.compile(f)
    for lo in [-0.5, 0.1, 0.3]:
        x = torch.randn(10)
        assert_same(c(x, lo), f(x, lo))


def test_dynamic_false_keeps_floats_constant():
    c = kiln.compile(temperature, dynamic=False)
    for t in [0.5, 0.7, 0.9]:
        c(torch.randn(2, 4), t)
    s = kiln.stats()
    assert s["graphs"] == 3 and all("a dynamic float" not in r["guards"] for r in s["graph_records"])


def test_dynamic_true_makes_floats_inputs_from_the_first_call():
    c = kiln.compile(temperature, dynamic=True)
    for t in [0.5, 0.7, 0.9]:
        x = torch.randn(2, 4)
        assert_same(c(x, t), temperature(x, t))
    assert kiln.stats()["graphs"] == 1


class Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x, scale):
        y = self.lin(x) * scale
        print("", end="")  # a graph break with the float live across it
        return y.relu() / scale


@pytest.mark.parametrize("backend", ["eager", "kiln"])
def test_a_float_across_a_graph_break(backend):
    m = Scaled()
    c = kiln.compile(m, backend=backend)
    for scale in [0.5, 0.25, 2.0, 3.0]:
        x = torch.randn(2, 8)
        assert_same(c(x, scale), m(x, scale))
    assert kiln.stats()["graphs"] == 4  # two graphs, each once static and once dynamic


def test_training_gradients_with_a_changing_float_scale():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    ref = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    ref.load_state_dict(m.state_dict())

    def loss_fn(model, x, y, weight):
        return ((model(x) - y) ** 2).mean() * weight

    c = kiln.compile(loss_fn)
    for weight in [0.5, 1.5, 0.75]:
        x, y = torch.randn(4, 8), torch.randn(4, 1)
        a, e = c(m, x, y, weight), loss_fn(ref, x, y, weight)
        a.backward()
        e.backward()
        torch.testing.assert_close(a, e)
        for p, q in zip(m.parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad)
    assert kiln.stats()["graphs"] == 2


def test_bfloat16_operand_within_bf16_tolerance():
    def f(x, t):
        return x * t + t
    c = kiln.compile(f)
    for _ in range(5):
        x, t = torch.randn(256, dtype=torch.bfloat16), random.random()
        r, e = c(x, t), f(x, t)
        assert r.dtype == torch.bfloat16
        torch.testing.assert_close(r, e, rtol=1.6e-2, atol=1e-2)


def test_a_float_over_a_size_expression_raises_as_eager_when_it_is_zero():
    # `n - 4` is 0 at n = 4 although size symbols are >= 2: the division must not stay a tensor
    # operation (inf) where Python raises ZeroDivisionError.
    def f(x, t, n):
        return x * (t / (n - 4))
    c = kiln.compile(f)
    for t, n in [(0.5, 5), (0.7, 6), (0.9, 7), (0.3, 8)]:
        x = torch.randn(3)
        assert_same(c(x, t, n), f(x, t, n))
    with pytest.raises(ZeroDivisionError):
        c(torch.randn(3), 0.2, 4)


def test_a_float_over_a_size_symbol_stays_dynamic():
    def f(x, t, n):
        return x * (t / n)
    c = kiln.compile(f)
    for t, n in [(0.5, 5), (0.7, 6), (0.9, 7), (0.3, 8), (0.1, 9)]:
        x = torch.randn(3)
        assert_same(c(x, t, n), f(x, t, n))
    assert kiln.stats()["graphs"] == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_alpha_and_value_keywords_take_a_dynamic_float(backend):
    # `p.add_(g, alpha=-lr)` (SGD) and `x.addcdiv_(a, b, value=-lr)`: the float stays an input.
    def f(p, g, a, lr):
        p = p.clone()
        p.add_(g, alpha=-lr)
        return p.sub(g, alpha=lr * 2).addcdiv(a, a.abs() + 1, value=lr), torch.add(p, g)

    def args():
        return torch.randn(5), torch.randn(5), torch.randn(5), random.uniform(1e-3, 1e-1)

    s = run_values(f, args, backend)
    assert s["graphs"] == 2 and s["recompiles"] == 1 and s["eager_runs"] == 0


def test_an_integer_add_with_a_float_alpha_raises_as_eager():
    def f(x, y, a):
        return x.add(y, alpha=a)

    c = kiln.compile(f)
    x = torch.arange(4)
    for a in (1.5, 2.5):
        with pytest.raises(RuntimeError, match="alpha"):
            c(x, x, a)


@pytest.mark.parametrize("name", ["sgd", "adamw"])
def test_an_lr_scheduler_does_not_recompile_the_optimizer_step_per_value(name):
    # The scheduler writes a new float into param_groups every step; the optimizer's functional
    # update takes it as an argument: two graphs (static, then dynamic), not one per step until
    # the recompile limit and eager steps after it.
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    ref = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    ref.load_state_dict(model.state_dict())

    def make(m):
        opt = (torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9) if name == "sgd"
               else torch.optim.AdamW(m.parameters(), lr=0.01))
        return opt, torch.optim.lr_scheduler.CosineAnnealingLR(opt, 20)

    def step(m, opt, x, y):
        loss = torch.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    opt, sched = make(model)
    ref_opt, ref_sched = make(ref)
    c = kiln.compile(step)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no recompile-limit warning
        for _ in range(12):
            x, y = torch.randn(4, 8), torch.randint(0, 2, (4,))
            assert_same(c(model, opt, x, y), step(ref, ref_opt, x, y), rtol=1e-4, atol=1e-5)
            sched.step()
            ref_sched.step()
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)
    s = kiln.stats()
    assert s["eager_runs"] == 0 and s["recompiles"] <= 3, s["recompile_reasons"]
    # SGD's momentum buffers go from None to tensors: the reason describes the tensor, not its values
    assert all(len(r) < 400 for r in s["recompile_reasons"]), s["recompile_reasons"]


class Annealed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.tau = 1.0
        self.seen = 0.0

    def forward(self, x):
        self.seen += self.tau  # a float attribute written back
        return torch.softmax(self.lin(x) / self.tau, -1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_float_attribute_annealed_between_calls_stays_an_input(backend):
    # Gumbel-softmax temperature annealing: the module's float attribute changes every step.
    m, ref = Annealed(), Annealed()
    ref.load_state_dict(m.state_dict())
    c = kiln.compile(m, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for step in range(12):
            m.tau = ref.tau = max(0.1, 1.0 - step * 0.07)
            x = torch.randn(4, 8)
            assert_same(c(x), ref(x))
            assert type(m.seen) is float and m.seen == pytest.approx(ref.seen, rel=1e-12)
    s = kiln.stats()
    assert s["graphs"] == 2 and s["recompiles"] == 1 and s["eager_runs"] == 0, s["recompile_reasons"]


def test_an_lr_read_from_param_groups_stays_an_input():
    groups = [{"lr": 0.1}]

    def update(p, g):
        p.add_(g, alpha=-groups[0]["lr"])
        return p

    c = kiln.compile(update)
    for step in range(12):
        groups[0]["lr"] = 0.1 / (step + 1)
        p, g = torch.randn(8), torch.randn(8)
        assert_same(c(p.clone(), g), update(p.clone(), g))
    s = kiln.stats()
    assert s["graphs"] == 2 and s["recompiles"] == 1 and s["eager_runs"] == 0, s["recompile_reasons"]
