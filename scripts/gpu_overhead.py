"""Per-call overhead on a GPU: a tiny graph on a CUDA tensor (`t + 1` on one element, and a
three-op chain), eager beside kiln and torch.compile in their default and reduce-overhead modes.
Host time per call with no synchronisation in the loop (the bench's tiny_call, on CUDA): the
best of 3 rounds of N calls, then one sync. Also the same with a sync after every call.

    python3 scripts/gpu_overhead.py [--n 5000] [--compilers kiln,inductor]"""
import argparse
import sys
import time

import torch

import gpu_common  # noqa: E402,F401  (kiln on sys.path)
import kiln  # noqa: E402


def per_call(fn, x, n, sync_each):
    best = float("inf")
    for _ in range(3):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            fn(x)
            if sync_each:
                torch.cuda.synchronize()
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - t0) / n * 1e6)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--compilers", default="kiln,inductor")
    a = ap.parse_args()
    graphs = {"add": lambda t: t + 1, "chain3": lambda t: (t * 2 + 1).relu()}
    print("graph | compiler | mode | us/call async | over eager | us/call synced | over eager")
    with torch.no_grad():
        for gname, f in graphs.items():
            x = torch.ones(1, device="cuda")
            e_async, e_sync = per_call(f, x, a.n, False), per_call(f, x, a.n // 5, True)
            print(f"{gname} | eager | - | {e_async:.2f} | 0 | {e_sync:.2f} | 0")
            for comp in a.compilers.split(","):
                for mode in ("default", "reduce-overhead"):
                    g = kiln.compile(f, mode=mode) if comp == "kiln" else torch.compile(f, mode=mode)
                    for _ in range(5):
                        g(x)
                    torch.testing.assert_close(g(x), f(x))
                    c_async, c_sync = per_call(g, x, a.n, False), per_call(g, x, a.n // 5, True)
                    print(f"{gname} | {comp} | {mode} | {c_async:.2f} | {c_async - e_async:+.2f} | {c_sync:.2f} | {c_sync - e_sync:+.2f}")


if __name__ == "__main__":
    main()
