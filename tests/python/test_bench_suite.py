"""Every case of the shared benchmark suite (../shared/bench/suite.py) compiled by kiln (its own
frontend + code generator) and by kiln's backend under PyTorch's Dynamo, against eager on
fresh random inputs. Inference cases must run generated code; training cases run their graphs
eagerly until the autograd layer exists, and their gradients must match too."""
import os
import sys

import pytest
import torch

import kiln
from kiln import _codegen



def _find_suite():
    """KILN_BENCH_SUITE_DIR, else shared/bench next to the checkout or any folder above it."""
    if os.environ.get("KILN_BENCH_SUITE_DIR"):
        return os.environ["KILN_BENCH_SUITE_DIR"]
    d = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    while True:
        for cand in (os.path.join(d, "shared", "bench"), os.path.join(d, "..", "shared", "bench")):
            if os.path.exists(os.path.join(cand, "suite.py")):
                return os.path.abspath(cand)
        if os.path.dirname(d) == d:
            return os.path.join("/work", "shared", "bench")  # the project's machines keep it here
        d = os.path.dirname(d)


SUITE_DIR = _find_suite()
if not os.path.exists(os.path.join(SUITE_DIR, "suite.py")):
    pytest.skip(f"the shared benchmark suite is not at {SUITE_DIR} (set KILN_BENCH_SUITE_DIR)", allow_module_level=True)
sys.path.insert(0, SUITE_DIR)
from suite import CASES  # noqa: E402

TOL = dict(rtol=1e-4, atol=1e-4)


def fresh(args):
    out = []
    for a in args:
        if a.dtype.is_floating_point:
            out.append(torch.randn_like(a))
        else:
            out.append(torch.randint(0, int(a.max()) + 1, a.shape, dtype=a.dtype))
    return tuple(out)


def output(o):
    return getattr(o, "last_hidden_state", o)


def step(fn, model, args, training):
    if not training:
        with torch.no_grad():
            return [output(fn(*args))]
    params = [p for p in model.parameters() if p.requires_grad]
    for p in params:
        p.grad = None
    loss = output(fn(*args)).float().pow(2).mean()
    loss.backward()
    return [loss.detach()] + [p.grad.clone() for p in params]


@pytest.mark.parametrize("compiler", ["kiln", "kiln-dynamo"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_suite_case_matches_eager(case, compiler):
    if case.startswith("hf_"):
        pytest.importorskip("transformers")
    torch.manual_seed(0)
    model, args, training = CASES[case]("cpu")
    if compiler == "kiln":
        compiled = kiln.compile(model)
    else:
        import torch._dynamo as dynamo
        dynamo.reset()
        compiled = torch.compile(model, backend=kiln.backend)
    step(compiled, model, args, training)          # first call: capture, trace, build
    for _ in range(2):
        new = fresh(args)
        got = step(compiled, model, new, training)
        ref = step(model, model, new, training)
        for g, r in zip(got, ref):
            torch.testing.assert_close(g, r, **TOL)
    statuses = [g.status for g in _codegen.GRAPHS]
    assert statuses, "no graph reached the code generator"
    if not training:
        assert all(s == "compiled" for s in statuses), statuses
