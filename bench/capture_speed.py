"""Capture speed: a function of N unrolled tensor operations (default 5,000), captured by kiln.

    python bench/capture_speed.py [--ops 5000] [--compare-dynamo]

Reports kiln's capture time (frame interpretation + shape propagation) and, with
--compare-dynamo, torch.compile's time for the same function with the "eager" backend (so only
Dynamo's tracing is measured, not Inductor's code generation).
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))
import torch  # noqa: E402


def make_fn(n):
    def fn(x, w):
        for i in range(n // 5):
            x = torch.tanh(x * w + 0.5)
            x = x - 0.1 * i
            x = x.relu()
        return x
    return fn


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ops", type=int, default=5000)
    p.add_argument("--compare-dynamo", action="store_true")
    a = p.parse_args()
    x, w = torch.randn(16, 16), torch.randn(16)
    # pay PyTorch's one-time meta-kernel imports first (any compiler pays them once per process)
    (torch.empty(2, device="meta") * 2).relu()
    import kiln
    fn = make_fn(a.ops)
    t0 = time.perf_counter()
    out = kiln.compile(fn)(x, w)
    total = time.perf_counter() - t0
    s = kiln.stats()
    rec = s["graph_records"][0]
    assert torch.allclose(out, fn(x, w)), "mismatch"
    print(f"kiln: {rec['ops']} ops captured in {rec['capture_s']:.3f} s (first call {total:.3f} s), breaks {s['graph_breaks']}")
    if a.compare_dynamo:
        t0 = time.perf_counter()
        torch.compile(fn, backend="eager")(x, w)
        print(f"torch.compile(backend='eager'): first call {time.perf_counter() - t0:.3f} s")


if __name__ == "__main__":
    main()
