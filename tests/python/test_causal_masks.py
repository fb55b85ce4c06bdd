"""Attention biases that are causal masks become SDPA's is_causal (csrc/torch_bridge/causal_masks.h).

Each case compiles a function whose attention mask is built inside it, runs it at several lengths
against eager on fresh inputs, and reads the ATen graph kiln compiled: a mask proven causal is
gone from the attention call (is_causal=True); any other mask stays as it was.
"""
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import kiln
from kiln import _codegen

from conftest import assert_same, llama_graph_texts, tiny_llama


def old_transformers_mask(q, k):
    """transformers 4.4x's _update_causal_mask without padding: the dtype's lowest value above the diagonal."""
    L, S = q.shape[-2], k.shape[-2]
    low = torch.finfo(q.dtype).min
    cache_position = torch.arange(0, L)
    m = torch.full((L, S), low, dtype=q.dtype)
    m = torch.triu(m, diagonal=1)
    m *= torch.arange(S) > cache_position.reshape(-1, 1)
    return m[None, None].expand(q.shape[0], 1, -1, -1)


def bool_mask(q, k):
    """transformers 4.5x's sdpa_mask: kv_idx <= q_idx as a boolean mask."""
    L, S = q.shape[-2], k.shape[-2]
    return (torch.arange(S)[None, :] <= torch.arange(L)[:, None])[None, None].expand(q.shape[0], -1, -1, -1)


def fp16_lowest_mask(q, k):
    """What PyTorch's cuDNN path (2.11) makes of a boolean mask: -65504 where masked, in any dtype."""
    L, S = q.shape[-2], k.shape[-2]
    return torch.where(torch.arange(S)[None, :] <= torch.arange(L)[:, None], 0.0, -65504.0).to(q.dtype)


def inf_mask(q, k):
    L, S = q.shape[-2], k.shape[-2]
    return torch.zeros(L, S, dtype=q.dtype).masked_fill(torch.ones(L, S, dtype=torch.bool).triu(1), float("-inf"))


def sliding_window(q, k):  # causal, and no further back than 8 keys: not SDPA's causal mask
    i, j = torch.arange(q.shape[-2])[:, None], torch.arange(k.shape[-2])[None, :]
    return (j <= i) & (j > i - 8)


def bottom_right(q, k):  # a query block at the end of a longer key sequence (decoding with a cache)
    L, S = q.shape[-2], k.shape[-2]
    return torch.arange(S)[None, :] <= torch.arange(L)[:, None] + (S - L)


def minus_ten_thousand(q, k):  # BERT's old convention: a large but finite penalty is not a mask
    L, S = q.shape[-2], k.shape[-2]
    return torch.ones(L, S, dtype=q.dtype).triu(1) * -10000.0


def sdpa_with(mask_fn):
    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask_fn(q, k)) * 2
    return f


def run_lengths(f, lengths, *, kv_extra=0, dtype=torch.float32):
    c = kiln.compile(f)
    for L in lengths:
        for _ in range(2):
            q = torch.randn(2, 4, L, 16, dtype=dtype)
            k, v = (torch.randn(2, 4, L + kv_extra, 16, dtype=dtype) for _ in range(2))
            tol = dict(rtol=2e-2, atol=2e-2) if dtype != torch.float32 else dict(rtol=1e-5, atol=1e-5)
            assert_same(c(q, k, v), f(q, k, v), **tol)
    texts = [g.graph_text for g in _codegen.GRAPHS]
    assert texts and all("scaled_dot_product" in t for t in texts), texts
    return texts


def causal_calls(text):
    return [line for line in text.splitlines() if "scaled_dot_product" in line and "is_causal=True" in line]


@pytest.mark.parametrize("mask_fn", [old_transformers_mask, bool_mask, inf_mask, fp16_lowest_mask], ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_causal_masks_become_is_causal(mask_fn, dtype):
    for text in run_lengths(sdpa_with(mask_fn), [16, 24, 40], dtype=dtype):
        calls = causal_calls(text)
        assert len(calls) == 1 and "attn_mask=%" not in calls[0] and "attn_bias=%" not in calls[0], text


@pytest.mark.parametrize("mask_fn", [sliding_window, minus_ten_thousand], ids=lambda f: f.__name__)
def test_other_masks_stay(mask_fn):
    for text in run_lengths(sdpa_with(mask_fn), [16, 24]):
        assert not causal_calls(text) and "attn_mask=%" in text, text


def test_bottom_right_mask_stays_unless_square():
    """With more keys than queries the mask is aligned to the bottom right, SDPA's is_causal to the
    top left: only the square case is the same mask."""
    for text in run_lengths(sdpa_with(bottom_right), [16], kv_extra=8):
        assert not causal_calls(text), text
    kiln.reset()
    for text in run_lengths(sdpa_with(bottom_right), [16], kv_extra=0):
        assert causal_calls(text), text


def test_mask_from_an_input_or_a_buffer_stays():
    """A mask read from data (a padding mask argument, a module's registered buffer, which the
    caller may change between calls) is not a function of sizes: it stays."""
    class Attn(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("causal", torch.ones(16, 16, dtype=torch.bool).tril())

        def forward(self, q, k, v, pad):
            m = self.causal & pad[:, None, None, :]
            return F.scaled_dot_product_attention(q, k, v, attn_mask=m), \
                F.scaled_dot_product_attention(q, k, v, attn_mask=self.causal)

    m = Attn()
    c = kiln.compile(m)
    for step in range(3):
        q, k, v = (torch.randn(2, 4, 16, 8) for _ in range(3))
        pad = torch.ones(2, 16, dtype=torch.bool)
        assert_same(c(q, k, v, pad), m(q, k, v, pad))
        if step == 1:
            m.causal.fill_(True)  # the buffer changes: compiled results must follow
    texts = [g.graph_text for g in _codegen.GRAPHS]
    assert texts and not any(causal_calls(t) for t in texts), texts


def test_mask_also_read_elsewhere_stays():
    def f(q, k, v):
        m = old_transformers_mask(q, k)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m), m.sum()
    for text in run_lengths(f, [16]):
        assert not causal_calls(text), text


def test_gradients_through_a_causal_mask():
    """A training graph: the forward call may become causal; gradients equal eager's."""
    f = sdpa_with(bool_mask)
    c = kiln.compile(f)
    for L in (16, 16, 24):
        args = [torch.randn(2, 4, L, 16, requires_grad=True) for _ in range(3)]
        ref = [a.detach().clone().requires_grad_() for a in args]
        out, expected = c(*args), f(*ref)
        assert_same(out, expected, rtol=1e-5, atol=1e-5)
        g = torch.randn_like(expected)
        out.backward(g)
        expected.backward(g)
        for a, r in zip(args, ref):
            torch.testing.assert_close(a.grad, r.grad, rtol=1e-4, atol=1e-5)


def test_llama_with_a_materialised_mask():
    """transformers' Llama as it runs under a compiler on transformers before 5.x, where the causal
    mask is always materialised (emulated by turning off 5.x's skip): the mask is recognised in
    each layer's attention, and values match eager; with a padded attention_mask it stays."""
    pytest.importorskip("transformers")
    import transformers.masking_utils as mu
    m = tiny_llama()
    skip = mu._ignore_causal_mask_sdpa
    mu._ignore_causal_mask_sdpa = lambda *a, **k: False
    try:
        unpadded, padded = llama_graph_texts(kiln.compile(m), m)
    finally:
        mu._ignore_causal_mask_sdpa = skip
    assert len(unpadded) == 1 and len(causal_calls(unpadded[0])) == 2, unpadded
    assert padded and not any(causal_calls(t) for t in padded), padded
