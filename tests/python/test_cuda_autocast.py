"""torch.autocast blocks inside compiled functions on CUDA (test_autocast_blocks.py covers the CPU):
the generated kernels and ATen calls compute in the dtypes eager's autocast picks, and the
caller's autocast does not cast the graph's calls a second time."""
import pytest
import torch
import torch.nn.functional as F

import kiln

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: kiln's CUDA path is not run here")


@pytest.fixture(autouse=True)
def fresh():
    kiln.reset()
    torch.manual_seed(0)
    yield
    assert not torch.is_autocast_enabled("cuda")


def check(got, want, tol):
    for g, w in zip(got, want):
        if isinstance(w, torch.Tensor):
            assert g.dtype == w.dtype, (g.dtype, w.dtype)
            torch.testing.assert_close(g.float(), w.float(), rtol=tol, atol=tol)
        else:
            assert g == w


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_block_inside_and_upcast_inside_a_callers_autocast(dtype):
    lin = torch.nn.Linear(64, 64).cuda()

    def f(x):
        with torch.autocast("cuda", dtype=dtype):
            q = lin(x)
            with torch.autocast("cuda", enabled=False):
                s = (q.float() @ q.float().transpose(-1, -2)) * 0.125
            p = s.softmax(-1)
        return F.gelu(p @ q.float()), q.dtype, s.dtype

    c = kiln.compile(f)
    for _ in range(3):
        x = torch.randn(4, 32, 64, device="cuda")
        check(c(x), f(x), 2e-2)
    s = kiln.stats()
    assert s["graphs"] == 1 and s["graph_breaks"] == 0, s["breaks"]
    # the caller's autocast around the call: the upcast block still computes in float32
    with torch.autocast("cuda", dtype=dtype):
        x = torch.randn(4, 32, 64, device="cuda")
        check(c(x), f(x), 2e-2)
