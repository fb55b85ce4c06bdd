"""Where a reduce-overhead call of NanoGPT (12L bf16, batch 1, 32 tokens) spends its time: the
whole call, the CUDA graph replay alone (input copy, replay, flag read, output copy), whether the
runner replayed or fell back, and the top Python functions of 50 calls under cProfile.

    python3 scripts/gpu_ro_breakdown.py"""
import cProfile
import pstats
import sys

import torch

import gpu_common  # noqa: E402  (kiln and the bench suite on sys.path)

import kiln  # noqa: E402
from kiln import _cudagraphs  # noqa: E402
from suite import NanoGPT  # noqa: E402


def main():
    torch.manual_seed(0)
    m = NanoGPT(12, 768, 12).to("cuda", torch.bfloat16).eval()
    ids = torch.randint(0, 8192, (1, 32), device="cuda")
    f = kiln.compile(m, mode="reduce-overhead")
    with torch.no_grad():
        for _ in range(4):
            f(ids)
        print(f"whole call: {gpu_common.sync_ms(lambda: f(ids)):.3f} ms")
        for r in _cudagraphs.RUNNERS:
            print(f"runner: disabled={r.disabled!r} replays={r.replays} captures={len(r.captures)}")
            for cap in r.captures.values():
                args = list(cap.static)
                print(f"  inputs {len(args)}, copied {len(cap.copied)}, flag {cap.flag is not None}")
                print(f"  replay alone: {gpu_common.sync_ms(lambda: cap.replay(args)):.3f} ms; graph replay only: {gpu_common.sync_ms(cap.cuda_graph.replay):.3f} ms")
                print(f"  signature: {gpu_common.sync_ms(lambda: _cudagraphs._signature(args)):.3f} ms")
        ind = torch.compile(m, mode="reduce-overhead")
        for _ in range(4):
            ind(ids)
        print(f"host us per call (GPU busy): kiln whole call {gpu_common.host_us(lambda: f(ids)):.1f}, "
              f"inductor whole call {gpu_common.host_us(lambda: ind(ids)):.1f}, eager {gpu_common.host_us(lambda: m(ids), 5):.1f}")
        for r in _cudagraphs.RUNNERS:
            for cap in r.captures.values():
                args = list(cap.static)
                print(f"host us per call (GPU busy): replay alone {gpu_common.host_us(lambda: cap.replay(args)):.1f}, "
                      f"graph launch {gpu_common.host_us(cap.cuda_graph.replay):.1f}, matches {gpu_common.host_us(lambda: cap.matches(args)):.1f}")
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(50):
            f(ids)
        torch.cuda.synchronize()
        pr.disable()
    pstats.Stats(pr).sort_stats("tottime").print_stats(15)


if __name__ == "__main__":
    main()
