"""Hand-written attention becomes one SDPA call (csrc/torch_bridge/attention_fusion.h).

Each case compiles a function that writes attention out (matmul, scale, optional mask, softmax,
matmul), compares it with eager on fresh inputs at two lengths, and reads the ATen graph kiln
compiled: where the pattern is provably attention, the scores' matmuls and softmax are gone and
one attention call stands in their place; anything else stays as written.
"""
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import kiln
from kiln import _codegen

from conftest import assert_same, llama_graph_texts, tiny_llama


def causal_fill(att, t):
    mask = torch.ones(t, t, dtype=torch.bool).tril()
    return att.masked_fill(~mask, float("-inf"))


def nanogpt_attention(q, k, v):
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
    att = causal_fill(att, q.shape[-2]).softmax(dim=-1)
    return (att @ v).transpose(1, 2).contiguous().flatten(2)


def divided_unmasked(q, k, v):  # an encoder's attention: no mask, divided by sqrt(d)
    att = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(q.shape[-1])
    return torch.softmax(att, dim=-1) @ v


def unscaled_permuted(q, k, v):
    return F.softmax(q @ k.permute(0, 1, 3, 2), dim=-1) @ v


def sliding_window(q, k, v):  # causal and at most 4 back: not SDPA's causal mask
    t = q.shape[-2]
    i, j = torch.arange(t)[:, None], torch.arange(t)[None, :]
    att = (q @ k.transpose(-2, -1)).masked_fill((j > i) | (j <= i - 4), float("-inf"))
    return att.softmax(-1) @ v


def scores_returned(q, k, v):  # the probabilities are an output too: the pattern stays
    p = (q @ k.transpose(-2, -1) * 0.25).softmax(-1)
    return p @ v, p


def softmax_on_other_dim(q, k, v):
    return (q @ k.transpose(-2, -1)).softmax(dim=-2) @ v


def lengths(f, dtype=torch.float32, ts=(16, 40)):
    c = kiln.compile(f)
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == torch.float32 else dict(rtol=3e-2, atol=3e-2)
    for t in ts:
        for _ in range(2):
            q, k, v = (torch.randn(2, 3, t, 16, dtype=dtype) for _ in range(3))
            assert_same(c(q, k, v), f(q, k, v), **tol)
    texts = [g.graph_text for g in _codegen.GRAPHS]
    assert texts
    return texts


def fused(text):
    return "scaled_dot_product" in text and "aten::bmm" not in text and "_softmax" not in text


@pytest.mark.parametrize("f", [nanogpt_attention, divided_unmasked, unscaled_permuted], ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_attention_by_hand_becomes_one_call(f, dtype):
    for text in lengths(f, dtype):
        assert fused(text), text


def test_causal_flag_follows_the_mask():
    (causal,) = set(lengths(nanogpt_attention, ts=(24,)))
    kiln.reset()
    (plain,) = set(lengths(divided_unmasked, ts=(24,)))
    assert "is_causal=True" in causal and "is_causal=False" in plain, (causal, plain)


@pytest.mark.parametrize("f", [sliding_window, scores_returned, softmax_on_other_dim], ids=lambda f: f.__name__)
def test_other_attention_stays(f):
    for text in lengths(f):
        assert "aten::bmm" in text and "scaled_dot_product" not in text, text


def test_nanogpt_model_and_its_training_graph():
    """NanoGPT's blocks: every layer's attention is one call at inference; in training the
    softmax is saved for the backward, so the pattern stays and gradients equal eager's."""
    class Block(nn.Module):
        def __init__(self, d=32, h=4):
            super().__init__()
            self.h, self.qkv, self.proj = h, nn.Linear(d, 3 * d), nn.Linear(d, d)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(x).split(d, dim=2)
            q, k, v = (z.view(b, t, self.h, d // self.h).transpose(1, 2) for z in (q, k, v))
            return x + self.proj(nanogpt_attention(q, k, v))

    m = nn.Sequential(Block(), Block()).eval()
    c = kiln.compile(m)
    with torch.no_grad():
        for t in (16, 16, 24):
            x = torch.randn(2, t, 32)
            assert_same(c(x), m(x), rtol=1e-4, atol=1e-5)
    texts = [g.graph_text for g in _codegen.GRAPHS]
    assert texts and all(t.count("is_causal=True") == 2 and "aten::bmm" not in t for t in texts), texts

    kiln.reset()
    m.train()
    c = kiln.compile(m)
    for _ in range(2):
        x = torch.randn(2, 16, 32, requires_grad=True)
        xr = x.detach().clone().requires_grad_()
        out, ref = c(x), m(xr)
        assert_same(out, ref, rtol=1e-4, atol=1e-5)
        out.square().sum().backward()
        ref.square().sum().backward()
        torch.testing.assert_close(x.grad, xr.grad, rtol=1e-4, atol=1e-5)
        for p in m.parameters():
            p.grad = None


def added_causal_bias_in_float32(q, k, v):  # transformers' eager attention: bias added, softmax in float32
    t = q.shape[-2]
    bias = torch.where(torch.arange(t)[None, :] <= torch.arange(t)[:, None], 0.0, torch.finfo(q.dtype).min).to(q.dtype)
    att = torch.matmul(q, k.transpose(2, 3)) * 0.25 + bias
    return F.softmax(att, dim=-1, dtype=torch.float32).to(q.dtype) @ v


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_added_causal_bias_and_float32_softmax(dtype):
    for text in lengths(added_causal_bias_in_float32, dtype):
        assert fused(text) and "is_causal=True" in text, text


def test_transformers_eager_attention():
    """Llama with attn_implementation="eager": each layer's attention, whose causal bias comes from
    sizes alone, is one causal attention call; with a padded attention_mask the bias is data and
    the attention stays as written. Values match eager either way."""
    pytest.importorskip("transformers")
    m = tiny_llama("eager")
    unpadded, padded = llama_graph_texts(kiln.compile(m), m)
    assert len(unpadded) == 1 and unpadded[0].count("is_causal=True") == 2 and "aten::bmm" not in unpadded[0], unpadded
    assert padded and all("aten::bmm" in t and "scaled_dot_product" not in t for t in padded), padded
