"""Runtime sizes in the code generator (issue 10, item 3): after a size changes, one kernel set
built for runtime sizes serves every later size of the dynamic dimensions (CPU inference, and
CPU training: one forward/backward pair).

Each case runs the compiled function over many sizes (odd ones for vector tails, non-contiguous
inputs) against eager on fresh values and asserts how many kernel sets were built: one static
build for the first size, then at most one for runtime sizes, never one per size."""
import math
import sys
import os

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import kiln
from kiln import _codegen
from conftest import assert_same


def run_sizes(fn, make, sizes, rounds=1, **kw):
    compiled = kiln.compile(fn, **kw)
    with torch.no_grad():
        for _ in range(rounds):
            for n in sizes:
                args = make(n)
                cp = (lambda a: a.clone() if isinstance(a, torch.Tensor) else a)
                expected = fn(*[cp(a) for a in args])
                actual = compiled(*[cp(a) for a in args])
                assert_same(actual, expected, rtol=1e-4, atol=1e-5)
    return compiled


def dynamic_graph():
    """The graph the frontend recompiled with symbolic sizes (the last one captured)."""
    graphs = [g for g in _codegen.GRAPHS if g.compiled]
    assert graphs, [g.status for g in _codegen.GRAPHS]
    return graphs[-1]


def assert_one_build(g, served):
    assert g.num_size_builds == 1, g.size_status
    assert g.num_specializations == 0, g.size_status
    assert g.num_sizes_served >= served, g.size_status
    assert "runtime sizes:" in g.size_status and "s0 = input" in g.size_status, g.size_status


def test_pointwise_and_reductions_over_ten_lengths():
    def fn(x, w):
        y = torch.softmax(x @ w, -1) * 2 + x.sum(-1, keepdim=True)
        return y, x.amax(1), F.layer_norm(x, (16,))
    w = torch.randn(16, 16)
    sizes = [5, 7, 9, 12, 33, 64, 17, 3, 31, 100]
    run_sizes(fn, lambda t: (torch.randn(2, t, 16), w), sizes, rounds=2)
    g = dynamic_graph()
    assert_one_build(g, served=len(sizes) - 3)


def test_reduction_over_the_dynamic_dim_with_tails():
    # The reduced extent is the dynamic size: vector blocks plus a scalar tail at every length.
    fn = lambda x: (x.exp().sum(-1), x.var(-1), x.argmax(-1))  # noqa: E731
    sizes = [13, 2, 5, 17, 63, 64, 65, 129, 7, 250]
    run_sizes(fn, lambda n: (torch.randn(3, n),), sizes, rounds=2)
    assert_one_build(dynamic_graph(), served=5)


def test_non_contiguous_inputs():
    def fn(x):
        y = x.transpose(0, 1)
        return (y.exp() * y.shape[1]).sum(-1), y.reshape(-1)[:3] * 2, y.cos() + 1
    sizes = [3, 4, 7, 17, 31, 2, 9, 40]
    run_sizes(fn, lambda n: (torch.randn(n, 5),), sizes, rounds=2)
    g = dynamic_graph()
    assert g.num_size_builds <= 1 and g.num_specializations <= 1, g.size_status


def test_views_and_broadcasts_of_the_dynamic_dim():
    def fn(x, b):
        n, t, d = x.shape
        y = x.view(n, t, 4, d // 4).transpose(1, 2) * b.view(1, 4, 1, d // 4)
        return y.reshape(n, 4, t * (d // 4)).mean(-1), y.sum(2)
    sizes = [3, 6, 11, 19, 24, 5, 37]
    b = torch.randn(32)
    run_sizes(fn, lambda t: (torch.randn(2, t, 32), b), sizes, rounds=2)
    assert_one_build(dynamic_graph(), served=3)


def test_attention_with_a_causal_mask_and_extern_matmuls():
    def fn(x, w):
        b, t, d = x.shape
        q = (x @ w).view(b, t, 4, d // 4).transpose(1, 2)
        att = (q @ q.transpose(-2, -1)) * (q.size(-1) ** -0.5)
        mask = torch.ones(t, t, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        return (att @ q).transpose(1, 2).reshape(b, t, d)
    w = torch.randn(16, 16)
    sizes = [5, 7, 9, 12, 33, 17, 23, 10, 41, 6]
    run_sizes(fn, lambda t: (torch.randn(2, t, 16), w), sizes, rounds=2)
    assert_one_build(dynamic_graph(), served=5)


def test_a_growing_cache():
    class Step(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(32, 96)

        def forward(self, x, k_cache, v_cache):
            q, k, v = self.qkv(x).split(32, dim=2)
            q, k, v = (z.view(2, 1, 4, 8).transpose(1, 2) for z in (q, k, v))
            k, v = torch.cat([k_cache, k], dim=2), torch.cat([v_cache, v], dim=2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(8))
            return (att.softmax(-1) @ v).transpose(1, 2).reshape(2, 1, 32), k, v

    m = Step().eval()
    compiled = kiln.compile(m)
    k = torch.randn(2, 4, 9, 8)
    v = torch.randn(2, 4, 9, 8)
    with torch.no_grad():
        for _ in range(12):
            x = torch.randn(2, 1, 32)
            expected = m(x, k, v)
            actual = compiled(x, k, v)
            assert_same(actual, expected, rtol=1e-4, atol=1e-5)
            k, v = expected[1], expected[2]
    g = dynamic_graph()
    assert_one_build(g, served=8)
    # Where the calls at new sizes went, summed over sizes (trace, lower, share with the build).
    t = dict(g.timings)
    assert all(t.get(k, 0) > 0 for k in ("sizes_trace", "sizes_lower", "sizes_share")), t


def test_two_dynamic_dims():
    fn = lambda x: (x.softmax(-1) * x.shape[0]).sum(0)  # noqa: E731
    shapes = [(3, 5), (4, 7), (6, 9), (5, 11), (7, 13), (9, 6), (3, 20)]
    run_sizes(fn, lambda s: (torch.randn(*s),), shapes)
    g = dynamic_graph()
    assert g.num_size_builds <= 1, g.size_status
    assert g.num_specializations <= 2, g.size_status


def test_size_arithmetic_inside_the_graph():
    # Sizes computed in Python (t * 2 + 1, arange(t)) reach the graph as symbolic sizes or ints.
    def fn(x):
        b, t = x.shape
        n = t * 2 + 1
        return x.new_ones(b, n) * t, torch.arange(t) * b + x.sum(1, keepdim=True), x.mean(1) * n
    sizes = [5, 7, 9, 11, 13, 17, 4, 30, 6]
    run_sizes(fn, lambda t: (torch.randn(3, t),), sizes, rounds=2)
    g = dynamic_graph()
    assert g.num_size_builds <= 1 and g.num_specializations <= 1, g.size_status


def test_an_integer_that_is_no_polynomial_keeps_specialising():
    # Pooling by 2 makes an extent (t - 2) // 2 + 1: kernels keep one specialisation per size,
    # and the reason is recorded.
    fn = lambda x: F.avg_pool1d(x, 2) + 1  # noqa: E731
    run_sizes(fn, lambda t: (torch.randn(2, 3, t),), [6, 9, 12, 15, 20, 7])
    g = dynamic_graph()
    assert g.num_size_builds == 0 or g.num_sizes_served > 0, g.size_status
    assert g.size_status, g.size_status


def test_nanogpt_over_sixteen_lengths():
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "bench"))
    suite = pytest.importorskip("suite")
    torch.manual_seed(0)
    model, sets, _ = suite.CASES["dyn_seq"]("cpu")
    sets = list(sets)
    compiled = kiln.compile(model)
    with torch.no_grad():
        for _ in range(2):
            for args in sets:
                assert_same(compiled(*args), model(*args), rtol=1e-3, atol=1e-4)
    s = kiln.stats()
    assert s["graphs"] <= 2, s.get("recompile_reasons")
    g = dynamic_graph()
    assert g.num_size_builds == 1, g.size_status
    # A length whose lowering differs (a coincidence of sizes fuses other loops) gets its own
    # specialisation; every other length runs the one kernel set.
    assert g.num_specializations <= 1, g.size_status
    assert g.num_sizes_served >= len(sets) - 4, g.size_status


WARM = r"""
import sys, torch, kiln
from kiln import _codegen
def f(x, w):
    return torch.softmax(x @ w, -1) * 2 + x.sum(-1, keepdim=True), x.var(1)
w = torch.ones(16, 16)
cf = kiln.compile(f)
with torch.no_grad():
    for t in [int(s) for s in sys.argv[1].split(",")]:
        x = torch.randn(2, t, 16)
        for a, b in zip(cf(x, w), f(x, w)):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
print("COMPILED", sum("compile" in g.timings for g in _codegen.GRAPHS), "BUILDS", [g.num_size_builds for g in _codegen.GRAPHS])
"""


def test_a_warm_process_at_new_sizes_builds_nothing(tmp_path):
    import subprocess
    env = dict(os.environ, KILN_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.dirname(kiln.__file__)), os.environ.get("PYTHONPATH", "")]))

    def run(sizes):
        out = subprocess.run([sys.executable, "-c", WARM, sizes], env=env, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        return out.stdout.split("COMPILED")[1].strip()

    cold = run("5,7,9,11,13")
    assert cold.startswith("2 ") and cold.endswith("[0, 1]"), cold  # static first size, then runtime sizes
    # Sizes the cold process never saw: the cached size template serves them, nothing compiles.
    warm = run("20,23,27,31")
    assert warm.startswith("0 "), warm


def test_the_option_off_keeps_one_specialisation_per_size():
    kiln._options.set("runtime_sizes", False)
    try:
        fn = lambda x: (x * 2).softmax(-1) + x.sum(-1, keepdim=True)  # noqa: E731
        run_sizes(fn, lambda t: (torch.randn(4, t),), [5, 6, 7, 8, 9])
    finally:
        kiln._options.unset("runtime_sizes")
    g = dynamic_graph()
    assert g.num_size_builds == 0 and g.num_specializations == 3, g.size_status
    assert "off" in g.size_status


def train_over_lengths(model, make, sizes, rounds=2, rtol=1e-4, atol=1e-5):
    """Training steps of `model` compiled and eager at each size in turn; loss and every gradient
    compared. Returns the dynamic graph (the last captured)."""
    compiled = kiln.compile(model)
    params = [p for p in model.parameters() if p.requires_grad]

    def step(fn, args):
        for p in params:
            p.grad = None
        loss = fn(*args).float().pow(2).mean()
        loss.backward()
        return [loss.detach()] + [p.grad.clone() for p in params]

    for _ in range(rounds):
        for n in sizes:
            args = make(n)
            got, expected = step(compiled, args), step(model, args)
            for a, e in zip(got, expected):
                torch.testing.assert_close(a, e, rtol=rtol, atol=atol)
    return _codegen.GRAPHS[-1]  # a training graph is never "compiled" for inference


def assert_one_training_build(g, served, specialised=0):
    assert g.num_size_builds == 1 and g.num_specializations == specialised, (g.size_status, g.training_status)
    assert g.num_sizes_served >= served, g.size_status
    assert g.size_status.startswith("training runtime sizes over s0 = input 0 dim 1"), g.size_status
    assert g.training_status.startswith("compiled forward and backward"), g.training_status


def test_training_over_ten_lengths_shares_one_forward_backward_build():
    # Each length used to get its own forward/backward pair (8 at most, then op by op).
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 8))
    sizes = [5, 7, 9, 5, 11, 13, 6, 17, 3, 21, 33]
    g = train_over_lengths(model, lambda n: (torch.randn(2, n, 8),), sizes)
    assert_one_training_build(g, served=len(set(sizes)) - 3)
    s = kiln.stats()
    assert (s["graphs"], s["recompiles"], s["eager_runs"]) == (2, 1, 0), s


def test_training_attention_over_lengths_with_softmax_and_matmul_backward():
    torch.manual_seed(0)

    class Attn(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv, self.proj, self.ln = nn.Linear(16, 48), nn.Linear(16, 16), nn.LayerNorm(16)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(self.ln(x)).split(d, dim=2)
            q, k, v = (z.view(b, t, 4, d // 4).transpose(1, 2) for z in (q, k, v))
            mask = torch.ones(t, t, dtype=torch.bool).tril()
            att = (q @ k.transpose(-2, -1) * (d // 4) ** -0.5).masked_fill(~mask, float("-inf")).softmax(-1)
            return x + self.proj((att @ v).transpose(1, 2).reshape(b, t, d))

    model = Attn()
    sizes = [8, 12, 16, 9, 23, 31, 4, 40]
    g = train_over_lengths(model, lambda n: (torch.randn(2, n, 16),), sizes, rtol=1e-3, atol=1e-4)
    # Length 4 equals the head dimension, where lowering fuses other loops: it gets a pair of its
    # own (and its results are checked like the others'); every other length shares one build.
    assert_one_training_build(g, served=len(sizes) - 4, specialised=1)
    assert "(1 specialised)" in g.size_status, g.size_status


def test_training_with_runtime_sizes_off_builds_per_length():
    kiln._options.set("runtime_sizes", False)
    try:
        model = nn.Sequential(nn.Linear(8, 8), nn.ReLU())
        g = train_over_lengths(model, lambda n: (torch.randn(3, n, 8),), [4, 6, 8, 10], rounds=1)
    finally:
        kiln._options.unset("runtime_sizes")
    assert g.num_size_builds == 0 and g.num_specializations == 2, g.size_status


WARM_TRAINING = r"""
import sys, torch, torch.nn as nn, kiln
from kiln import _codegen
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8))
cf = kiln.compile(model)
for t in [int(s) for s in sys.argv[1].split(",")]:
    x = torch.randn(2, t, 8)
    grads = []
    for fn in (cf, model):
        model.zero_grad()
        fn(x).pow(2).mean().backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
print("BUILDS", [g.num_size_builds for g in _codegen.GRAPHS], [g.size_status for g in _codegen.GRAPHS])
"""


def test_a_warm_process_trains_at_new_sizes_without_compiling(tmp_path):
    import subprocess
    cache = tmp_path / "cache"
    env = dict(os.environ, KILN_CACHE_DIR=str(cache),
               PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.dirname(kiln.__file__)), os.environ.get("PYTHONPATH", "")]))

    def run(sizes):
        out = subprocess.run([sys.executable, "-c", WARM_TRAINING, sizes], env=env, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        return out.stdout.split("BUILDS")[1].strip()

    def libraries():
        return sorted(p.name for p in cache.rglob("*.so"))

    cold = run("5,7,9,11,13")
    assert "one forward/backward build serves" in cold, cold
    built = libraries()
    # Sizes the cold process never saw, the first one included: the cached forward and backward
    # templates serve them from the first call on; no kernel is compiled.
    warm = run("20,23,27,31")
    assert "kernels from the cache's size templates" in warm or "one forward/backward build serves" in warm, warm
    assert libraries() == built, (warm, sorted(set(libraries()) - set(built)))
