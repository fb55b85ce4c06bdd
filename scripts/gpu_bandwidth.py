"""Achieved memory bandwidth of the memory-bound bench cases on a GPU: the fewest bytes a case must
move (each input read once, each output written once) over its kernels' device time per call
(torch.profiler, kernels only, no launch gaps), beside the device's own ceiling measured here (a
256 MB device-to-device copy, bytes read plus written), and over whole calls timed back to back by
CUDA events (what a caller sees). kiln beside torch.compile.

    python3 scripts/gpu_bandwidth.py [case ...]   (default: pointwise_ln softmax)"""
import sys

import torch

import gpu_common  # noqa: E402  (kiln and the bench suite on sys.path)

import kiln  # noqa: E402
from suite import CASES  # noqa: E402


def kernel_us(fn, args, iters=20):
    with torch.no_grad():
        rows = gpu_common.kernel_rows(fn, args, iters)
    return sum(us for _, us, _ in rows), [(k, us) for k, us, _ in rows]


def main():
    cases = sys.argv[1:] or ["pointwise_ln", "softmax"]
    name = torch.cuda.get_device_name()
    ceiling = gpu_common.copy_ceiling()
    print(f"{name}: 256 MB copy {ceiling:.2f} TB/s (read + write)")
    print("case | compiler | bytes MB | kernel us per call | TB/s | % of copy ceiling | call us (events) | TB/s (events) | kernels")
    for case in cases:
        torch.manual_seed(0)
        model, args, _ = CASES[case]("cuda")
        args = args if isinstance(args, tuple) else tuple(args)[0]
        with torch.no_grad():
            out = model(*args)
        outs = out if isinstance(out, (tuple, list)) else (out,)
        nbytes = sum(t.numel() * t.element_size() for t in list(args) + list(outs) if isinstance(t, torch.Tensor))
        nbytes += sum(p.numel() * p.element_size() for p in model.parameters())
        for comp, fn in (("kiln", kiln.compile(model)), ("inductor", torch.compile(model))):
            us, rows = kernel_us(fn, args)
            tbs = nbytes / (us * 1e-6) / 1e12
            with torch.no_grad():  # whole calls back to back (launch gaps hidden by the queue)
                call_us = gpu_common.cuda_ms_per_call(fn, args) * 1e3
            print(f"{case} | {comp} | {nbytes / 1e6:.1f} | {us:.1f} | {tbs:.2f} | {100 * tbs / ceiling:.0f}% | "
                  f"{call_us:.1f} | {nbytes / (call_us * 1e-6) / 1e12:.2f} | " + "; ".join(f"{k[:40]} {v:.1f}" for k, v in rows))


if __name__ == "__main__":
    main()
