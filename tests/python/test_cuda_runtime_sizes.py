"""CUDA kernels for runtime sizes (issue 10 item 3 on CUDA): after a size changes, one CUDA
kernel set that takes the sizes as kernel parameters serves every later size of the dynamic
dimensions, with launches computed per size, vector code where the size allows it and the scalar
twin where it does not (odd lengths).

Each case runs the compiled function over many sizes (1, odd ones for vector tails and
misaligned row starts, non-contiguous inputs) against eager on fresh values, then asserts how
many kernel sets were built. Skips without a CUDA device."""
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import kiln
from kiln import _codegen

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: kiln's CUDA path is not run here")

DEV = "cuda"


def close(a, b, rtol=1e-4, atol=1e-5):
    a = a if isinstance(a, (tuple, list)) else (a,)
    b = b if isinstance(b, (tuple, list)) else (b,)
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.shape == y.shape and x.dtype == y.dtype, (x.shape, y.shape, x.dtype, y.dtype)
        torch.testing.assert_close(x, y, rtol=rtol, atol=atol, equal_nan=True)


def run_sizes(fn, make, sizes, rounds=2, **tol):
    compiled = kiln.compile(fn)
    with torch.no_grad():
        for _ in range(rounds):
            for n in sizes:
                args = make(n)
                cp = (lambda a: a.clone() if isinstance(a, torch.Tensor) else a)
                expected = fn(*[cp(a) for a in args])
                actual = compiled(*[cp(a) for a in args])
                torch.cuda.synchronize()
                close(actual, expected, **tol)
    return compiled


def sized_graph():
    graphs = [g for g in _codegen.GRAPHS if g.compiled and g.num_size_builds]
    assert graphs, [(g.status, g.size_status) for g in _codegen.GRAPHS]
    return graphs[-1]


def assert_few_builds(g, served, specialised=2):
    # One static build (the first size) plus one for runtime sizes; a few sizes (1, where loops
    # vanish) may get their own.
    assert g.num_size_builds == 1, g.size_status
    assert g.num_specializations <= specialised, g.size_status
    assert g.num_sizes_served >= served, g.size_status


def test_softmax_over_the_dynamic_length_many_sizes():
    # Scores [b, h, t, t]: the row length and the row stride are the runtime size.
    def fn(x):
        return torch.softmax(x * 0.5, -1), x.amax(-1), x.sum(-1)
    sizes = [16, 24, 40, 33, 7, 64, 1, 2, 129, 31, 48, 17]
    run_sizes(fn, lambda t: (torch.randn(2, 3, t, t, device=DEV),), sizes)
    assert_few_builds(sized_graph(), served=len(sizes) - 5)


def test_layer_norm_and_pointwise_rows_with_tails():
    def fn(x, w, b):
        y = F.gelu(x * w + b, approximate="tanh")
        return F.layer_norm(y, (x.shape[-1],), w, b) + x, y.mean(0)
    w, b = torch.randn(96, device=DEV), torch.randn(96, device=DEV)
    sizes = [8, 12, 20, 1, 3, 5, 77, 1000, 9, 256]
    run_sizes(fn, lambda t: (torch.randn(t, 96, device=DEV), w, b), sizes)
    assert_few_builds(sized_graph(), served=len(sizes) - 5)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_types_odd_lengths(dtype):
    def fn(x):
        return (x.float().exp() * 2).to(dtype), x.var(-1)
    sizes = [32, 48, 64, 31, 33, 17, 1, 100, 257]
    run_sizes(fn, lambda n: (torch.randn(4, n, device=DEV).to(dtype),), sizes, rtol=2e-2, atol=2e-2)
    assert_few_builds(sized_graph(), served=len(sizes) - 5)


def test_non_contiguous_and_misaligned_inputs():
    def fn(x):
        y = x.transpose(0, 1)
        return y.exp().sum(-1), y.cos() + 1
    sizes = [8, 16, 24, 5, 13, 40, 2, 64]
    run_sizes(fn, lambda n: (torch.randn(n + 1, 5, device=DEV)[1:],), sizes)
    assert_few_builds(sized_graph(), served=len(sizes) - 5)


class Block(nn.Module):
    def __init__(self, d=64, heads=4):
        super().__init__()
        self.ln, self.qkv, self.proj, self.h = nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(d, d), heads

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln(x)).split(d, -1)
        q, k, v = (z.view(b, t, self.h, d // self.h).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // self.h))
        mask = torch.ones(t, t, device=x.device, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        return x + self.proj((att @ v).transpose(1, 2).reshape(b, t, d))


def test_attention_block_over_sequence_lengths():
    m = Block().to(DEV).eval()
    sizes = [16, 24, 32, 40, 17, 9, 64, 33, 48, 5]
    run_sizes(m, lambda t: (torch.randn(2, t, 64, device=DEV),), sizes, rtol=1e-3, atol=1e-4)
    assert_few_builds(sized_graph(), served=len(sizes) - 5)



@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_causal_softmax_rows_in_and_beyond_the_row_cache(dtype):
    # A runtime-size row kernel keeps rows that fit its register cache (bf16 scores: up to 768 a
    # row) in registers and runs a plain body for longer ones: both, and odd lengths (scalar twin).
    def fn(x):
        t = x.shape[-1]
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        return (x * 0.125).masked_fill(~mask, float("-inf")).softmax(-1)
    sizes = [256, 288, 320, 352, 736, 768, 800, 1100, 40, 33]
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == torch.float32 else dict(rtol=1e-2, atol=1e-2)
    run_sizes(fn, lambda t: (torch.randn(2, 2, t, t, device=DEV, dtype=dtype),), sizes, **tol)
    g = sized_graph()
    assert "the row fits the row cache" in g.source, g.source[:2000]
    assert_few_builds(g, served=len(sizes) - 4)

def test_growing_kv_cache():
    def step(q, k_cache, v_cache, k, v):
        k, v = torch.cat([k_cache, k], 2), torch.cat([v_cache, v], 2)
        att = ((q @ k.transpose(-2, -1)) * 0.125).softmax(-1)
        return att @ v, k, v
    b, h, hd = 1, 4, 64
    sizes = list(range(10, 30))
    mk = lambda n: (torch.randn(b, h, 1, hd, device=DEV), torch.randn(b, h, n, hd, device=DEV), torch.randn(b, h, n, hd, device=DEV),  # noqa: E731
                    torch.randn(b, h, 1, hd, device=DEV), torch.randn(b, h, 1, hd, device=DEV))
    run_sizes(step, mk, sizes, rounds=1, rtol=1e-3, atol=1e-4)
    assert_few_builds(sized_graph(), served=len(sizes) - 8)


def test_attention_over_a_growing_cache_is_traced_without_cudnn_at_new_lengths():
    """Hand-written attention becomes SDPA's call (attention_fusion.h). At a graph's first size
    SDPA may pick cuDNN attention; the sizes served after it are traced with cuDNN off (cuDNN
    builds a plan per new length, 40 ms each on an H200), and the user's setting is put back."""
    def step(q, k_cache, v_cache):
        att = ((q @ k_cache.transpose(-2, -1)) * (1.0 / math.sqrt(128))).softmax(-1)
        return att @ v_cache
    b, h, hd = 2, 8, 128
    mk = lambda n: tuple(torch.randn(b, h, m, hd, device=DEV, dtype=torch.bfloat16) for m in (1, n, n))  # noqa: E731
    sizes = list(range(200, 216))
    compiled = run_sizes(step, mk, sizes, rounds=1, rtol=2e-2, atol=2e-2)
    assert torch.backends.cuda.cudnn_sdp_enabled()
    g = sized_graph()
    assert_few_builds(g, served=len(sizes) - 8)
    assert "scaled_dot_product" in g.graph_text and "aten::bmm" not in g.graph_text, g.graph_text
    from torch.profiler import ProfilerActivity, profile
    with torch.no_grad(), profile(activities=[ProfilerActivity.CUDA]) as prof:
        compiled(*mk(sizes[-1]))
        torch.cuda.synchronize()
    names = [e.key for e in prof.key_averages()]
    assert not any("cudnn" in n for n in names), names


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_few_rows_with_a_bulk_copy_split_over_blocks(dtype):
    # A decoding step's kernel: the layer norm of 8 tokens fused with a key cache's concatenation
    # (a row split over many blocks that each recompute its statistics), at several cache lengths.
    def fn(x, w, cache, k):
        return F.layer_norm(x, (x.shape[-1],), w, w), torch.cat([cache, k], 2)
    w = torch.randn(2048, device=DEV).to(dtype)
    sizes = [64, 65, 66, 67, 100, 1, 129]
    mk = lambda n: (torch.randn(8, 2048, device=DEV).to(dtype), w, torch.randn(8, 16, n, 128, device=DEV).to(dtype),  # noqa: E731
                    torch.randn(8, 16, 1, 128, device=DEV).to(dtype))
    tol = {} if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
    run_sizes(fn, mk, sizes, **tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_training_over_lengths_shares_one_forward_backward_build(dtype):
    # Training at many lengths: one forward/backward pair of runtime-size kernels (loss and every
    # gradient against eager); a few lengths whose lowering differs may get pairs of their own.
    torch.manual_seed(0)
    m = Block().to(DEV, dtype).train()
    compiled = kiln.compile(m)
    params = list(m.parameters())
    sizes = [16, 24, 32, 40, 17, 9, 64, 33, 48, 5]
    tol = dict(rtol=1e-3, atol=1e-4) if dtype == torch.float32 else dict(rtol=5e-2, atol=5e-2)
    for _ in range(2):
        for t in sizes:
            x = torch.randn(2, t, 64, device=DEV, dtype=dtype)
            got = []
            for fn in (compiled, m):
                for p in params:
                    p.grad = None
                loss = fn(x).float().pow(2).mean()
                loss.backward()
                got.append([loss.detach()] + [p.grad.clone() for p in params])
            torch.cuda.synchronize()
            for a, e in zip(*got):
                torch.testing.assert_close(a, e, **tol)
    g = _codegen.GRAPHS[-1]
    assert g.num_size_builds == 1, (g.size_status, g.training_status)
    assert g.num_specializations <= 3, g.size_status
    assert g.num_sizes_served >= len(sizes) - 6, g.size_status


def test_a_new_size_runs_its_compiled_kernels_at_its_first_call():
    # A size the shared kernels serve is traced (run eagerly) at its first call; its compiled run
    # happens then too, outputs discarded, so per-shape set-up (cuBLASLt's bias+GELU epilogue
    # matmul, which the traced run never calls) is not paid by its second call.
    kiln.reset()
    m = nn.Sequential(nn.Linear(64, 256), nn.GELU(approximate="tanh"), nn.Linear(256, 64)).to(DEV).eval()
    sizes = [16, 24, 32, 40, 48, 56, 72, 80]
    run_sizes(m, lambda t: (torch.randn(t, 64, device=DEV),), sizes, rtol=1e-3, atol=1e-4)
    g = sized_graph()
    assert_few_builds(g, served=len(sizes) - 3)
    # The sizes after the template exists, and the one whose call built it.
    assert g.num_sizes_run_at_first_call >= len(sizes) - 4, g.size_status


def test_a_new_size_that_writes_an_input_or_draws_random_numbers_runs_once():
    # Running a graph twice would write its input twice or draw random numbers twice: such a
    # graph's first call at a new size is its traced run alone.
    def writes(x, acc):
        acc.add_(x.sum(0))
        return torch.softmax(x, -1)

    kiln.reset()
    compiled = kiln.compile(writes)
    with torch.no_grad():
        for t in [16, 24, 32, 40, 48, 56]:
            x = torch.randn(t, 32, device=DEV)
            acc, acc_ref = torch.zeros(32, device=DEV), torch.zeros(32, device=DEV)
            close(compiled(x, acc), writes(x, acc_ref))
            close(acc, acc_ref)
    assert all(g.num_sizes_run_at_first_call == 0 for g in _codegen.GRAPHS), [g.size_status for g in _codegen.GRAPHS]

    def draws(x):
        return torch.softmax(x + torch.rand_like(x), -1)

    kiln.reset()
    compiled = kiln.compile(draws)
    with torch.no_grad():
        for t in [16, 24, 32, 40, 48, 56]:
            x = torch.randn(t, 32, device=DEV)
            torch.manual_seed(t)
            got = compiled(x)  # each size's first call: the generator advances as eager's
            state = torch.cuda.get_rng_state()
            torch.manual_seed(t)
            assert got.shape == draws(x).shape
            assert torch.equal(state, torch.cuda.get_rng_state())
    assert all(g.num_sizes_run_at_first_call == 0 for g in _codegen.GRAPHS), [g.size_status for g in _codegen.GRAPHS]
