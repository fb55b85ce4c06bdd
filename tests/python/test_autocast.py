"""Compiled functions called under torch.autocast: the capture must see the dtypes eager computes
there (meta kernels know nothing of autocast), so code that reads a dtype is captured right, and
results, dtypes and random numbers equal eager's."""
import pytest
import torch
import torch.nn.functional as F

import kiln


@pytest.fixture(autouse=True)
def fresh():
    kiln.reset()
    torch.manual_seed(0)


def run_both(fn, *args, dtype=torch.bfloat16, calls=3):
    compiled = kiln.compile(fn)
    for _ in range(calls):
        with torch.autocast("cpu", dtype=dtype):
            got = compiled(*args)
            want = fn(*args)
    return got, want


def test_a_dtype_read_inside_the_graph_sees_autocasts_dtype():
    # The capture saw float32 for the linear's result: `.to(y.dtype)` was captured as a cast to
    # float32 and y.dtype returned float32, where eager gives bfloat16 (a silently wrong result).
    lin = torch.nn.Linear(32, 32)

    def f(x):
        y = lin(x)
        z = torch.softmax(y, -1, dtype=torch.float32).to(y.dtype)
        return z, y.dtype, torch.zeros(2, dtype=y.dtype), y.view(4, 2, 16).transpose(1, 2).reshape(4, 32)

    got, want = run_both(f, torch.randn(4, 32))
    assert got[1] == want[1] == torch.bfloat16
    for a, b in zip(got[::2] + got[3:], want[::2] + want[3:]):
        assert a.dtype == b.dtype, (a.dtype, b.dtype)
        torch.testing.assert_close(a.float(), b.float(), rtol=1e-2, atol=1e-2)
    assert kiln.stats()["graph_breaks"] == 0, kiln.stats()["breaks"]


def test_attention_with_a_float_mask_under_autocast_is_one_graph():
    # The meta kernel refuses a bfloat16 query with a float32 mask (autocast would cast the mask):
    # the capture takes the result's metadata from the call on full-size stand-ins instead.
    qkv = torch.nn.Linear(16, 48)

    def f(x, mask):
        q, k, v = qkv(x).view(2, 8, 3, 2, 8).permute(2, 0, 3, 1, 4)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    mask = torch.zeros(2, 1, 8, 8)
    mask[1, :, :, 6:] = float("-inf")
    got, want = run_both(f, torch.randn(2, 8, 16), mask)
    assert got.dtype == want.dtype == torch.bfloat16
    torch.testing.assert_close(got.float(), want.float(), rtol=2e-2, atol=2e-2)
    s = kiln.stats()
    assert s["graphs"] == 1 and s["graph_breaks"] == 0, s["breaks"]


def test_random_operators_under_autocast_draw_what_eager_draws():
    # The capture's extra run of each operator on stand-ins puts the generator's state back.
    lin = torch.nn.Linear(16, 16)

    def f(x):
        return F.dropout(lin(x), p=0.5, training=True) * 2

    x = torch.randn(8, 16)
    compiled = kiln.compile(f)
    for seed in range(3):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            torch.manual_seed(seed)
            got = compiled(x)
            torch.manual_seed(seed)
            want = f(x)
        torch.testing.assert_close(got.float(), want.float(), rtol=1e-2, atol=1e-2)
        assert torch.equal(got == 0, want == 0)
