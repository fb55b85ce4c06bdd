"""Public API: compile forms, modules, options validation, backends, explain, stats, reset."""
import os

import pytest
import torch
import torch.fx

import kiln
from conftest import assert_same, check


def test_decorator_forms():
    @kiln.compile
    def a(x):
        return x + 1

    @kiln.compile(fullgraph=True, backend="eager")
    def b(x):
        return x * 2
    x = torch.randn(3)
    assert torch.equal(a(x), x + 1) and torch.equal(b(x), x * 2)
    assert a.__name__ == "a" and a.__wrapped__ is not None


def test_compiled_method_binding():
    class K:
        @kiln.compile
        def m(self, x):
            return x * 3
    x = torch.randn(2)
    assert torch.equal(K().m(x), x * 3)


def test_module_shares_state():
    m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    c = kiln.compile(m)
    assert isinstance(c, torch.nn.Module)
    assert list(c.state_dict()) == list(m.state_dict())
    assert all(p is q for p, q in zip(c.parameters(), m.parameters()))
    c.eval()
    assert not m.training and not c.training
    c.train()
    assert m.training and m[0].training
    assert c[0] is m[0]
    m.extra = 5
    assert c.extra == 5
    sd = {k: torch.zeros_like(v) for k, v in m.state_dict().items()}
    c.load_state_dict(sd)
    assert torch.equal(m[0].weight, torch.zeros(8, 4))
    x = torch.randn(3, 4)
    assert_same(c(x), m(x))
    assert "CompiledModule" in repr(c)


def test_compiled_module_truth_value_is_the_originals():
    # `kiln.compile(m) or fallback` and `if model:` must not raise for a module without __len__.
    lin = torch.nn.Linear(2, 2)
    assert bool(kiln.compile(lin)) is bool(lin) is True
    assert bool(kiln.compile(torch.nn.Sequential())) is bool(torch.nn.Sequential()) is False
    assert bool(kiln.compile(torch.nn.Sequential(lin))) is True


def test_training_through_compiled_module():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.Linear(8, 1))
    c = kiln.compile(m)
    x = torch.randn(5, 4)
    c(x).pow(2).mean().backward()
    g1 = [p.grad.clone() for p in m.parameters()]
    m.zero_grad()
    m(x).pow(2).mean().backward()
    for a, b in zip(g1, m.parameters()):
        torch.testing.assert_close(a, b.grad)


@pytest.mark.parametrize("kwargs,err", [
    (dict(fullgraph="yes"), TypeError),
    (dict(dynamic="sometimes"), TypeError),
    (dict(mode="fastest"), ValueError),
    (dict(backend="nope"), ValueError),
    (dict(backend=3), TypeError),
    (dict(options={"no_such_option": 1}), ValueError),
    (dict(options={"recompile_limit": "8"}), TypeError),
    (dict(options={"recompile_limit": -1}), ValueError),
    (dict(options={"logs": "guards"}), ValueError),
    (dict(options=[1]), TypeError),
    (dict(disable=1), TypeError),
])
def test_bad_arguments_clear_errors(kwargs, err):
    with pytest.raises(err) as ei:
        kiln.compile(lambda x: x, **kwargs)
    assert "kiln" in str(ei.value)


def test_not_callable():
    with pytest.raises(TypeError, match="callable"):
        kiln.compile(5)


def test_bad_env_option(monkeypatch):
    monkeypatch.setenv("KILN_LOGS", "bogus")
    with pytest.raises(ValueError, match="unknown log channel"):
        kiln._options.log_channels()
    monkeypatch.setenv("KILN_MEMOIZE_META", "maybe")
    with pytest.raises(ValueError, match="boolean"):
        kiln._options.get("memoize_shape_propagation")


def test_modes_and_options_listed():
    assert set(kiln.list_mode_options()) == {"default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"}
    opts = kiln.list_options()
    assert opts["recompile_limit"]["default"] == 8 and opts["logs"]["env"] == "KILN_LOGS"
    for mode in kiln.list_mode_options():
        check(lambda x: x * 2, lambda: (torch.randn(2),), mode=mode)
        kiln.reset()


def test_disable_flag():
    c = kiln.compile(lambda x: x + 1, disable=True)
    c(torch.randn(2))
    assert kiln.stats()["frames_compiled"] == 0


def test_kiln_disable_decorator():
    @kiln.disable
    def helper(x):
        return x * 2

    def g(x):
        return helper(x) + 1
    x = torch.randn(2)
    assert torch.equal(kiln.compile(g)(x), g(x))
    assert "kiln.disable" in kiln.stats()["breaks"][0]["reason"]


def test_backends_listed_and_registered():
    assert {"eager", "aot_eager", "kiln"} <= set(kiln.list_backends())
    seen = []

    def my_backend(gm, example_inputs):
        seen.append((gm, example_inputs))
        return gm.forward
    kiln.register_backend("mine", my_backend)
    assert "mine" in kiln.list_backends()
    with pytest.raises(ValueError):
        kiln.register_backend("eager", my_backend)
    with pytest.raises(TypeError):
        kiln.register_backend("bad", 3)
    check(lambda x, y: (x @ y).relu() + 1, lambda: (torch.randn(3, 4), torch.randn(4, 2)), backend="mine")
    gm, ex = seen[0]
    assert isinstance(gm, torch.fx.GraphModule)
    assert [n.op for n in gm.graph.nodes].count("placeholder") == 2
    assert all(isinstance(t, torch.Tensor) for t in ex) and ex[0].shape == (3, 4)
    assert "relu" in gm.code


def test_callable_backend_receives_graph_module_with_module_params():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm
    m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh())
    check(m, lambda: (torch.randn(2, 4),), backend=backend)
    gm = graphs[0]
    assert len([n for n in gm.graph.nodes if n.op == "placeholder"]) == 3
    # the fx graph itself reproduces eager when run on fresh inputs
    x = torch.randn(2, 4)
    out = gm(x, m[0].weight, m[0].bias)
    assert_same(out[0], m(x))


def test_backend_error_surfaces():
    def broken(gm, ex):
        raise RuntimeError("backend exploded")
    with pytest.raises(RuntimeError, match="backend exploded"):
        kiln.compile(lambda x: x + 1, backend=broken)(torch.randn(2))


def test_kiln_as_dynamo_backend():
    import torch._dynamo
    torch._dynamo.reset()
    fn = torch.compile(lambda x: (x * 2).sin(), backend=kiln.backend)
    x = torch.randn(4)
    assert_same(fn(x), (x * 2).sin())
    torch._dynamo.reset()


def test_explain_reports_graphs_breaks_guards():
    def g(x):
        y = x * 2
        print("break")
        return y
    out = kiln.explain(g)(torch.randn(3))
    assert out.graph_break_count == 1 and "print()" in str(out)
    assert __file__ in out.breaks[0]["where"]
    out = kiln.explain(lambda x: x.relu())(torch.randn(3))
    assert out.graph_count == 1 and "relu" in str(out) and "check_tensor" in str(out)


def test_explain_of_a_function_compiled_before_reports_its_graphs():
    # Its code's cache entries would serve the call: explain starts from nothing, as Dynamo's does.
    def g(x):
        y = x.relu()
        print("break")
        return y * 2
    x = torch.randn(3)
    compiled = kiln.compile(g)
    compiled(x)
    for f in (g, compiled):
        out = kiln.explain(f)(x)
        assert out.graph_count == 2 and out.graph_break_count == 1, str(out)
        assert_same(out.result, g(x))


def test_a_resume_function_takes_only_the_tensors_its_graph_reads():
    # After the break, the frame holds x, y and z; the graph after it reads z only.
    def g(x):
        y = x * 2
        z = y + 1
        print("break")
        return z.relu(), y

    out = kiln.explain(g)(torch.randn(3))
    resumed = [gr["code"] for gr in out.graphs if "relu" in gr["code"]]
    assert len(resumed) == 1 and "def forward(self, l_z_):" in resumed[0], resumed


def test_stats_and_reset():
    c = kiln.compile(lambda x: x + 1)
    c(torch.randn(2))
    s = kiln.stats()
    for key in ("graphs", "graph_breaks", "frames_compiled", "recompiles", "guard_failures", "compile_s", "cache_hits"):
        assert key in s
    assert s["compile_s"]["capture"] > 0
    assert "code generator" in s["kiln_backend"]
    kiln.reset()
    assert kiln.stats()["graphs"] == 0
    c(torch.randn(2))  # recompiles after reset
    assert kiln.stats()["frames_compiled"] == 1


def _explain_helper(t):
    print("helper")
    return t * 2


def test_explain_shows_user_stack_of_breaks_and_recompile_guards(capsys):
    def f(x):
        out = []
        for k in (2, 3):  # a break inside a loop: f runs eagerly, the helper is compiled per call
            out.append(_explain_helper(x[:k]).sum())
        return out

    e = kiln.explain(f)(torch.randn(5))
    text = str(e)
    assert "user stack (outermost first)" in text and "_explain_helper at" in text
    assert e.recompiles and "expected 2, actual 3" in e.recompiles[0]
    assert "Recompile 0: _explain_helper" in text
    # The recompile shows where the call came from: f's line calling the helper, then the helper.
    stack = e.recompile_stacks[0].strip().splitlines()
    call_line = f.__code__.co_firstlineno + 3
    assert f"f at {__file__}:{call_line}" in stack[-2] and stack[-1].strip().startswith("_explain_helper at")
    assert "called from (outermost first)" in text
    # only the user's frames: not kiln's own (explain's runner)
    kiln_dir = os.path.dirname(os.path.abspath(kiln.__file__))
    assert not any(kiln_dir in line for line in stack), stack


def _prints_then_adds(x):
    print("between graphs")
    return x + 1


def test_break_stack_starts_at_the_eager_callers(capsys):
    # A break's stack: who called the compiled function (eager frames), the compiled frame at
    # the call it inlined, then the inlined callee at the break.
    def f(x):
        return _prints_then_adds(x * 2) * 3

    def caller(x):
        return kiln.explain(f)(x)

    e = caller(torch.ones(2))
    stack = e.breaks[0]["stack"].strip().splitlines()
    assert stack[-1].strip().startswith("_prints_then_adds at")
    assert stack[-2].strip().endswith(f"<locals>.f at {__file__}:{f.__code__.co_firstlineno + 1}")
    assert any("<locals>.caller at" in line for line in stack[:-2]), stack
    kiln_dir = os.path.dirname(os.path.abspath(kiln.__file__))
    assert not any(kiln_dir in line for line in stack), stack


def test_reduce_overhead_on_the_cpu_runs_the_compiled_graph():
    def f(x):
        return (x * 2).relu().sum(-1)

    c = kiln.compile(f, mode="reduce-overhead")
    for _ in range(3):
        x = torch.randn(8, 16)
        torch.testing.assert_close(c(x), f(x))
    assert kiln.stats()["graphs"] == 1


def test_graph_code_names_torch_ops_as_written():
    # Calling torch.ops.aten.mul.Tensor raised SyntaxError from torch.fx (the graph recorded the
    # nameless pybind builtin behind the overload), and torch.ops.aten.x printed as
    # "torch._ops.aten.pybind11_detail_function_record_...x".
    def f(dy, x):
        return torch.ops.aten.gelu_backward(dy, x, approximate="tanh") + torch.ops.aten.mul.Tensor(x, 2)
    kiln.reset()
    x, dy = torch.randn(5), torch.randn(5)
    assert torch.allclose(kiln.compile(f)(dy, x), f(dy, x))
    code = kiln.stats()["graph_records"][0]["code"]
    assert "torch.ops.aten.gelu_backward(l_dy_, l_x_, approximate='tanh')" in code, code
    assert "torch.ops.aten.mul.Tensor(l_x_, 2)" in code, code


def test_a_function_without_tensor_arguments_that_uses_torch_is_compiled():
    # An EMA update over models held in globals takes only a float: kiln looked at the arguments
    # alone, skipped the frame and compiled nothing, silently. Code naming the torch module is
    # captured, as Dynamo's has_tensor_in_frame counts it.
    torch.manual_seed(0)
    global _EMA_MODEL, _EMA_AVERAGE
    _EMA_MODEL = torch.nn.Linear(8, 8)
    _EMA_AVERAGE = torch.nn.Linear(8, 8)
    expected = [p.detach().clone() for p in _EMA_AVERAGE.parameters()]

    @kiln.compile
    def ema_update(decay):
        with torch.no_grad():
            for avg, p in zip(_EMA_AVERAGE.parameters(), _EMA_MODEL.parameters()):
                avg.mul_(decay).add_(p, alpha=1 - decay)

    for _ in range(3):
        ema_update(0.9)
        for e, p in zip(expected, _EMA_MODEL.parameters()):
            e.mul_(0.9).add_(p.detach(), alpha=0.1)
    for e, a in zip(expected, _EMA_AVERAGE.parameters()):
        torch.testing.assert_close(a.detach(), e)
    s = kiln.stats()
    assert (s["graphs"], s["skipped_frames"]) == (1, 0), (s["graphs"], s["skipped_frames"])
