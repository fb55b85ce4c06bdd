"""Every case of the real-model suite (bench/models.py: small random-weight `transformers` models
called the way users call them) compiled by kiln must capture at least one graph and match eager
on fresh inputs over two calls. Graph-break counts and speed are benchmark outputs
(python bench/models.py), not asserted here."""
import os
import sys

import pytest
import torch

pytest.importorskip("transformers")

import kiln  # noqa: E402

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "bench")))
import models  # noqa: E402

# Cases kiln gets wrong today, with the exact failure; strict, so a fix shows up as XPASS.
KNOWN_FAILURES = {}  # none today; a case kiln gets wrong goes here with its exact failure


def _params():
    for name in models.CASES:
        marks = []
        if name in KNOWN_FAILURES:
            marks.append(pytest.mark.xfail(strict=True, reason=KNOWN_FAILURES[name]))
        yield pytest.param(name, marks=marks, id=name)


@pytest.mark.parametrize("name", list(_params()))
def test_model_matches_eager(name):
    model, make_inputs, run = models.build(name)
    compiled = kiln.compile(model)
    for _ in range(2):
        inputs = make_inputs()
        with torch.no_grad():
            expected = models.output_tensor(run(model, inputs))
            actual = models.output_tensor(run(compiled, inputs))
        assert actual.shape == expected.shape and actual.dtype == expected.dtype
        torch.testing.assert_close(actual, expected, rtol=1e-3, atol=1e-3)
    s = kiln.stats()
    assert s["graphs"] >= 1, (s["graphs"], s["breaks"][:3])


def test_suite_is_broad():
    families = {fam for fam, _ in models.CASES.values()}
    assert len(models.CASES) >= 12
    assert {"encoder", "decoder", "decoder+kv", "encoder-decoder", "vision", "audio", "moe"} <= families
