"""`with torch.autocast(...)` inside a compiled function: captured into the graph (it was a graph
break at the with-statement, and a function that began with one captured nothing). Results,
dtypes and gradients equal eager's on every backend; autocast is as eager leaves it after every
call, a failed or broken one included."""
import pytest
import torch
import torch.nn.functional as F

import kiln
from conftest import assert_same

BACKENDS = ["eager", "aot_eager", "kiln"]


@pytest.fixture(autouse=True)
def fresh():
    kiln.reset()
    torch.manual_seed(0)
    yield
    assert not torch.is_autocast_enabled("cpu"), "a call left autocast on"


def close(got, want, tol=2e-2):
    if isinstance(want, (tuple, list)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            close(g, w, tol)
    elif isinstance(want, torch.Tensor):
        assert got.dtype == want.dtype, (got.dtype, want.dtype)
        torch.testing.assert_close(got.float(), want.float(), rtol=tol, atol=tol)
    else:
        assert got == want


def graph_code():
    return "\n".join(r["code"] for r in kiln.stats()["graph_records"])


def upcast_scores(q, k):
    # transformers' GPT-2 _upcast_and_reordered_attn: attention scores in float32 whatever the
    # caller's autocast, then softmax.
    with torch.autocast("cpu", enabled=False):
        s = torch.bmm(q.float(), k.float().transpose(1, 2)) * 0.125
    return s.softmax(-1), s.dtype


@pytest.mark.parametrize("backend", BACKENDS)
def test_autocast_disabled_inside_a_callers_autocast_computes_in_float32(backend):
    lin = torch.nn.Linear(16, 16)

    def f(x):
        q = lin(x)  # bfloat16 under the caller's autocast
        return upcast_scores(q, q) + (q.dtype,)

    c = kiln.compile(f, backend=backend)
    for _ in range(3):
        x = torch.randn(2, 8, 16)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            got, want = c(x), f(x)
        close(got, want, tol=1e-5)  # the block's bmm is float32 in both: no bfloat16 rounding
        assert got[1] == torch.float32 and got[2] == torch.bfloat16
    s = kiln.stats()
    assert s["graphs"] == 1 and s["graph_breaks"] == 0, s["breaks"]
    assert "torch.amp._enter_autocast('cpu', torch.bfloat16, False, True)" in graph_code()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_function_that_begins_with_an_autocast_block_is_one_graph(backend):
    mlp = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))

    def f(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = mlp(x)
            inner = y.dtype
        return F.log_softmax(y.float(), -1), inner, torch.is_autocast_enabled("cpu")

    c = kiln.compile(f, backend=backend)
    for _ in range(3):
        x = torch.randn(8, 16)
        close(c(x), f(x))
    s = kiln.stats()
    assert s["graphs"] == 1 and s["graph_breaks"] == 0, s["breaks"]
    code = graph_code()
    assert "_enter_autocast" in code and "_exit_autocast" in code


def test_a_block_that_changes_nothing_is_not_in_the_graph():
    # transformers' maybe_autocast(enabled=False) with autocast already off: no block at all.
    def f(x):
        with torch.autocast("cpu", enabled=False):
            return x.float() * 2

    c = kiln.compile(f, backend="eager")
    x = torch.randn(4)
    assert_same(c(x), f(x))
    assert "_enter_autocast" not in graph_code()
    assert kiln.stats()["graph_breaks"] == 0


def test_the_callers_autocast_dtype_is_guarded():
    # A graph captured under bfloat16 autocast served float16 autocast: `y.dtype` came back
    # bfloat16 and the cast to it too (a silently wrong result).
    lin = torch.nn.Linear(16, 16)

    def f(x):
        y = lin(x)
        return y.float().softmax(-1).to(y.dtype), y.dtype

    c = kiln.compile(f, backend="eager")
    x = torch.randn(4, 16)
    for dtype in (torch.bfloat16, torch.float16, torch.bfloat16):
        with torch.autocast("cpu", dtype=dtype):
            got, want = c(x), f(x)
        assert got[1] == want[1] == dtype and got[0].dtype == dtype
    assert kiln.stats()["graphs"] == 2
    assert "autocast_cpu=1 (bf16)" in kiln.stats()["graph_records"][0]["guards"]


@pytest.mark.parametrize("backend", ["eager", "kiln"])
def test_a_graph_break_inside_a_block_runs_the_break_under_autocast(backend):
    lin = torch.nn.Linear(16, 16)
    seen = []

    def f(x):
        y = lin(x)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            z = lin(y)
            seen.append(torch.is_autocast_enabled("cpu"))
            print(end="")  # a graph break inside the block
            w = lin(z)
        return w.float() + 1, z.dtype, w.dtype, torch.is_autocast_enabled("cpu")

    c = kiln.compile(f, backend=backend)
    for _ in range(3):
        x = torch.randn(4, 16)
        seen.clear()
        got = c(x)
        assert seen == [True]
        close(got, f(x))
    s = kiln.stats()
    assert s["graph_breaks"] >= 1 and s["eager_runs"] == 0
    assert all("print" in b["reason"] or "autocast" in b["reason"] for b in s["breaks"]), s["breaks"]


def test_nested_blocks_around_a_break_are_left_innermost_first():
    lin = torch.nn.Linear(8, 8)

    def f(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            a = lin(x)
            with torch.autocast("cpu", enabled=False):
                b = lin(a.float())
                print(end="")
                c = lin(b)
            d = lin(c)
        return a.dtype, b.dtype, c.dtype, d.dtype, d.float().sum()

    c = kiln.compile(f, backend="eager")
    for _ in range(2):
        x = torch.randn(2, 8)
        close(c(x), f(x))


@pytest.mark.parametrize("backend", ["eager", "kiln"])
def test_an_exception_inside_a_block_surfaces_and_autocast_is_left(backend):
    def f(x, fail):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = x @ x
            if fail:
                raise ValueError("inside the block")
        return y

    c = kiln.compile(f, backend=backend)
    x = torch.randn(4, 4)
    close(c(x, False), f(x, False))
    with pytest.raises(ValueError, match="inside the block"):
        c(x, True)
    assert not torch.is_autocast_enabled("cpu")


def test_a_capture_that_fails_inside_a_block_leaves_autocast_as_it_was():
    # A break kiln cannot take inside the block (inside a loop): the frame runs eagerly, and the
    # capture's own entering of the block is undone.
    def f(x):
        for i in range(2):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                x = x @ x
                print(end="")
        return x

    c = kiln.compile(f, backend="eager")
    x = torch.randn(4, 4) / 4
    close(c(x), f(x))
    assert not torch.is_autocast_enabled("cpu")


@pytest.mark.filterwarnings("ignore:`torch.cpu.amp.autocast")
def test_the_context_object_and_the_deprecated_cpu_spelling():
    def f(x):
        with torch.autocast("cpu", dtype=torch.bfloat16) as ac:
            y = x @ x
        with torch.cpu.amp.autocast(dtype=torch.bfloat16):
            z = x @ y.float()
        return y, z, ac.fast_dtype

    c = kiln.compile(f, backend="eager")
    x = torch.randn(4, 4)
    close(c(x), f(x))
    assert kiln.stats()["graph_breaks"] == 0, kiln.stats()["breaks"]


@pytest.mark.parametrize("backend", ["aot_eager", "kiln"])
def test_training_under_an_autocast_block_matches_eager_gradients(backend):
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    ref = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    ref.load_state_dict(model.state_dict())

    def step(m, x, y):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = m(x)
        return F.cross_entropy(logits.float(), y)

    c = kiln.compile(step, backend=backend)
    for _ in range(3):
        x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
        got, want = c(model, x, y), step(ref, x, y)
        got.backward()
        want.backward()
        close(got, want)
        for p, q in zip(model.parameters(), ref.parameters()):
            close(p.grad, q.grad)
    assert kiln.stats()["graph_breaks"] == 0


def test_transformers_gpt2_upcast_attention_under_autocast_is_one_graph():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=64, n_positions=32,
                                  reorder_and_upcast_attn=True, attn_implementation="eager")
    model = transformers.GPT2LMHeadModel(cfg).eval()
    c = kiln.compile(model)
    with torch.no_grad():
        for n in (8, 8):
            ids = torch.randint(0, 64, (2, n))
            with torch.autocast("cpu", dtype=torch.bfloat16):
                got, want = c(ids).logits, model(ids).logits
            close(got, want, tol=5e-2)
    s = kiln.stats()
    assert s["graph_breaks"] == 0, s["breaks"]


def autocast_nesting():
    n = torch.autocast_decrement_nesting() + 1
    torch.autocast_increment_nesting()
    return n


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_graph_that_raises_inside_a_block_leaves_it(backend):
    # The graph's own _exit_autocast never runs when an operator inside the block raises: the
    # caller's autocast state (nesting depth included) is put back, as leaving the with-block does.
    emb = torch.nn.Embedding(10, 4)

    def f(ids):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = emb(ids) @ torch.ones(4, 4)
        return y

    c = kiln.compile(f, backend=backend)
    close(c(torch.tensor([1, 2])), f(torch.tensor([1, 2])))
    before = autocast_nesting()
    with pytest.raises(IndexError):
        c(torch.tensor([1, 12]))
    assert not torch.is_autocast_enabled("cpu") and autocast_nesting() == before
    close(c(torch.tensor([3, 4])), f(torch.tensor([3, 4])))
