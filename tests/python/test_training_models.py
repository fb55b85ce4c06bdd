"""Training models end to end through kiln's autograd layer (issue 11, items 2, 4, 8): attention with
layer norm, embeddings and dropout, a transformers model, repeated and shared arguments, an input
written in place; each compares the loss and every gradient with eager over several steps and
asserts the graph count. Also what the partitioner saves (logged) and which backward operators
are generated code."""
import copy
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import kiln
from kiln import _codegen
from conftest import assert_same

TOL = dict(rtol=1e-4, atol=1e-5)


def compare_steps(model, make_inputs, steps=3, seeded=False, loss_fn=lambda out: out.float().pow(2).mean()):
    """Trains `model` compiled and a copy eagerly on the same inputs; returns the compiled one."""
    ref = copy.deepcopy(model)
    compiled = kiln.compile(model)
    for step in range(steps):
        inputs = make_inputs()
        for m in (model, ref):
            m.zero_grad(set_to_none=True)
        if seeded:
            torch.manual_seed(step)
        la = loss_fn(compiled(*inputs))
        if seeded:
            torch.manual_seed(step)
        lb = loss_fn(ref(*inputs))
        la.backward()
        lb.backward()
        assert_same(la.detach(), lb.detach(), **TOL)
        for (name, p), q in zip(model.named_parameters(), ref.parameters()):
            assert (p.grad is None) == (q.grad is None), name
            if q.grad is not None:
                torch.testing.assert_close(p.grad, q.grad, **TOL, msg=lambda m: f"{name}: {m}")
    return compiled


def training_statuses():
    return [g.training_status for g in _codegen.GRAPHS]


def assert_one_compiled_graph():
    s = kiln.stats()
    assert s["graphs"] == 1 and s["graph_breaks"] == 0, (s["graphs"], s["graph_breaks"])
    statuses = training_statuses()
    assert len(statuses) == 1 and statuses[0].startswith("compiled forward and backward"), statuses


def backward_text(g):
    return g.graph_text.split("# backward\n", 1)[1]


class Block(nn.Module):
    """A pre-norm transformer block: causal attention and a gelu MLP, with dropout."""

    def __init__(self, d=32, heads=4, p=0.1):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.drop = nn.Dropout(p)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // self.heads))
        mask = torch.ones(t, t, dtype=torch.bool).tril()
        att = self.drop(att.masked_fill(~mask, float("-inf")).softmax(-1))
        x = x + self.proj((att @ v).transpose(1, 2).contiguous().view(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class TinyLM(nn.Module):
    def __init__(self, vocab=50, d=32, ctx=16):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        self.blocks = nn.Sequential(Block(d), Block(d))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        return self.head(self.ln(self.blocks(x)))


def test_attention_language_model_with_dropout_is_one_compiled_graph():
    model = TinyLM().train()
    compare_steps(model, lambda: [torch.randint(0, 50, (2, 16))], seeded=True)
    assert_one_compiled_graph()
    bwd = backward_text(_codegen.GRAPHS[0])
    # Layer norm's and softmax's backward are generated code (their formulas lowered), not ATen calls.
    program = _codegen.GRAPHS[0].program_text.split("# backward\n", 1)[1]
    assert "aten::native_layer_norm_backward" in bwd and "aten::_softmax_backward_data" in bwd
    assert all("native_layer_norm_backward" not in line and "_softmax_backward_data" not in line
               for line in program.splitlines() if line.startswith("extern")), program


def test_a_transformers_model_trains_as_one_compiled_graph():
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=64, n_positions=16,
                                     bos_token_id=0, eos_token_id=0)
    model = transformers.GPT2Model(config).train()
    compare_steps(model, lambda: [torch.randint(0, 64, (2, 16))], seeded=True,
                  loss_fn=lambda out: out.last_hidden_state.pow(2).mean())
    assert_one_compiled_graph()


def test_the_same_tensor_passed_twice_gets_both_gradients():
    def f(a, b):
        return (a * b).sin() + a
    compiled = kiln.compile(f)
    for _ in range(3):
        x = torch.randn(4, 5, requires_grad=True)
        y = x.detach().clone().requires_grad_()
        compiled(x, x).sum().backward()
        f(y, y).sum().backward()
        assert_same(x.grad, y.grad, **TOL)
    assert_one_compiled_graph()


class Tied(nn.Module):
    """An embedding and an output projection sharing one weight (a parameter of two modules)."""

    def __init__(self):
        super().__init__()
        self.emb, self.head = nn.Embedding(10, 8), nn.Linear(8, 10, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, i):
        return self.head(torch.tanh(self.emb(i)))


def test_a_parameter_shared_between_modules_accumulates_both_uses():
    compare_steps(Tied(), lambda: [torch.randint(0, 10, (3, 4))])
    assert_one_compiled_graph()


def test_an_input_written_in_place_is_copied_back_after_the_training_graph():
    def f(x, w, counts):
        counts.add_(1)  # written in place, as BatchNorm's running statistics are
        return (x @ w).relu() * counts
    compiled = kiln.compile(f)
    w = torch.randn(5, 5, requires_grad=True)
    w_ref = w.detach().clone().requires_grad_()
    counts, counts_ref = torch.zeros(5), torch.zeros(5)
    for _ in range(3):
        x = torch.randn(3, 5)
        compiled(x, w, counts).sum().backward()
        f(x, w_ref, counts_ref).sum().backward()
        assert_same(w.grad, w_ref.grad, **TOL)
        assert_same(counts, counts_ref)
    assert_one_compiled_graph()


@pytest.mark.parametrize("partitioner", ["min_cut", "save_all"])
def test_the_autograd_log_prints_the_saved_set(partitioner, monkeypatch, capfd):
    monkeypatch.setenv("KILN_LOGS", "autograd")
    kiln._options.set("partitioner", partitioner)
    try:
        m = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
        compare_steps(m, lambda: [torch.randn(5, 8)])
    finally:
        kiln._options.unset("partitioner")
    err = capfd.readouterr().err
    assert "[kiln:autograd] training graph: compiled forward and backward; saved: primals" in err, err
    assert "f32[5, 16]{16, 1}" in err, err  # an activation of the batch


def test_min_cut_keeps_what_a_backward_matmul_reads_instead_of_recomputing_it():
    # The gelu output is the second linear's weight-gradient operand: recomputing it in the
    # backward would write it to memory there again, so the forward saves it (as save_all does).
    m = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
    compare_steps(m, lambda: [torch.randn(5, 8)])
    assert "aten::gelu(" not in backward_text(_codegen.GRAPHS[0])


def test_enable_grad_inside_no_grad_inside_a_training_graph():
    def f(x, w):
        h = x @ w
        with torch.no_grad():
            scale = h.abs().amax()
            with torch.enable_grad():
                g = (h * 2).tanh()
        return g / (scale + 1) + h.detach().sin()
    compiled = kiln.compile(f)
    for _ in range(3):
        x = torch.randn(4, 6)
        w = torch.randn(6, 5, requires_grad=True)
        w_ref = w.detach().clone().requires_grad_()
        a, b = compiled(x, w), f(x, w_ref)
        assert_same(a, b, **TOL)
        a.pow(2).sum().backward()
        b.pow(2).sum().backward()
        assert_same(w.grad, w_ref.grad, **TOL)
    assert_one_compiled_graph()
