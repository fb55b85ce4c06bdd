"""Programs with `assert` statements for test_break_parity.py (pytest rewrites asserts only in
test modules, so these keep the bytecode users write)."""
import torch  # noqa: F401


def assert_then_write_input(x):
    assert x.sum() > 0
    x.add_(1)
    return x * 2
