"""Differential program fuzzing (tests/fuzz): a fixed range of generated programs, each run eagerly
and through kiln.compile (first call, repeat, fresh values, five shapes, back to the first two, a dim at 1) in crash-isolated worker
processes. Any crash, wrong value, exception mismatch or timeout fails the test; the message holds
the failing programs' sources (replay one with `python -m tests.fuzz.minimize FILE`).

    pytest tests/python/test_fuzz.py                 # seeds 0:400 (env KILN_FUZZ_SEEDS=A:B to change)
    python -m tests.fuzz --seeds 0:5000              # the long run (see tests/fuzz/README.md)
"""
import os
import sys

import pytest

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
from tests.fuzz.generator import generate  # noqa: E402
from tests.fuzz.runner import FAILURES, parse_seeds, run_seeds, save_failure, summarize  # noqa: E402

SEEDS = os.environ.get("KILN_FUZZ_SEEDS", "0:400")


def test_generator_is_deterministic_and_valid():
    a, b = generate(7), generate(7)
    assert a.source == b.source
    assert generate(8).source != a.source
    compile(a.source, "<fuzz>", "exec")


def test_fuzz_kiln():
    results, wall = run_seeds(parse_seeds(SEEDS), compiler="kiln", backend="kiln", jobs=2, timeout=60.0)
    print(summarize(results, wall, f"[kiln, seeds {SEEDS}]"))
    fails = [r for r in results if r["outcome"] in FAILURES]
    eager_errors = sum(r.get("eager_error", False) for r in results)
    assert eager_errors <= 0.15 * len(results), f"generator: {eager_errors}/{len(results)} programs raise eagerly"
    if fails:
        out = "/tmp/kiln_fuzz/pytest"
        msg = [summarize(results, wall, f"[kiln, seeds {SEEDS}]"), f"{len(fails)} failing programs (saved to {out}):"]
        for r in fails:
            path = save_failure(out, r)
            msg.append(f"\n===== seed {r['seed']}: {r['outcome']} ({path})\n{r['detail'][:1500]}\n{r['source']}")
        pytest.fail("\n".join(msg), pytrace=False)
