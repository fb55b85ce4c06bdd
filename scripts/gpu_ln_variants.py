"""pointwise_ln's row kernel (layer_norm(gelu(x * w + b) + x), 8192 rows of 4096 floats) in
hand-written variants beside kiln's generated kernel, to find what the generator should emit:
NVRTC (through CuPy, kiln's flags) compiles scripts/gpu_ln_variants.cu and the generated kernels of
the golden files named on the command line; each runs on the same inputs, checked against a float64
reference, timed with CUDA events (median of 5 rounds of 50 launches), with its registers and the
bandwidth it reaches (268 MB moved) against a 256 MB device copy.

    python3 scripts/gpu_ln_variants.py [--once] [golden.txt[:prefix.cuh] ...]
        (default golden: tests/cpp/data/golden_cuda/pointwise_layer_norm_value_cache.txt;
         --once: one launch of each, for ncu)"""
import os
import statistics
import sys

import cupy as cp
import numpy as np
import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
N, D = 8192, 4096


def golden_kernels(path):
    """The generated code of a golden file (its '# code' section)."""
    return open(path).read().split("# code\n", 1)[1]


def copy_tbs():
    a = torch.randn(64 << 20, device="cuda")
    c = torch.empty_like(a)
    ts = []
    for i in range(23):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        c.copy_(a)
        e.record()
        torch.cuda.synchronize()
        if i >= 3:
            ts.append(s.elapsed_time(e))
    return 2 * a.numel() * 4 / statistics.median(ts) / 1e9


def main():
    once = "--once" in sys.argv
    goldens = [a for a in sys.argv[1:] if not a.startswith("--")] or [
        os.path.join(ROOT, "tests/cpp/data/golden_cuda/pointwise_layer_norm_value_cache.txt")]
    prefix = open(os.path.join(ROOT, "csrc/codegen/cuda/prefix.cuh")).read()
    variants = open(os.path.join(ROOT, "scripts/gpu_ln_variants.cu")).read()
    mods = []
    for i, arg in enumerate(goldens):  # each golden's kernel0 in a module of its own, with its launch's block
        g, _, other_prefix = arg.partition(":")  # golden[:prefix.cuh] (a golden of another tree, with its prefix)
        pre = open(other_prefix).read() if other_prefix else prefix
        launch = open(g).read().split("# launches\n", 1)[1].split("\n", 1)[0]
        block = int(launch.split(" block=", 1)[1].split()[0])
        nparams = len(launch.split("params=[", 1)[1].split("]", 1)[0].split(","))
        mod = cp.RawModule(code=pre + golden_kernels(g), options=("-std=c++17",), backend="nvrtc")
        mods.append((f"kiln{i} {os.path.basename(g)}", mod, "kernel0", block, nparams))
    vmod = cp.RawModule(code=prefix + variants, options=("-std=c++17",), backend="nvrtc")

    torch.manual_seed(0)
    x = torch.randn(N, D, device="cuda")
    w, b = torch.randn(D, device="cuda"), torch.randn(D, device="cuda")
    lw, lb = torch.randn(D, device="cuda"), torch.randn(D, device="cuda")
    out = torch.empty_like(x)
    xd = x.double()
    refs = {}

    def reference(params):
        if id(params[2]) not in refs:
            p = [t.double() for t in params]
            refs[id(params[2])] = F.layer_norm(F.gelu(xd * p[0] + p[1]) + xd, (D,), p[2], p[3], 1e-5)
        return refs[id(params[2])]
    nbytes = 2 * N * D * 4 + 4 * D * 4
    ceiling = copy_tbs()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"{torch.cuda.get_device_name()}: {sms} SMs, 256 MB copy {ceiling:.2f} TB/s (read + write); {nbytes / 1e6:.1f} MB per call")
    X, W, B, LW, LB, O = (cp.asarray(t) for t in (x, w, b, lw, lb, out))

    runs = []  # (label, function, grid, block, args)
    for label, mod, name, block, nparams in mods:
        if nparams == 6:  # x, w, b, the layer norm's weight and bias, out
            runs.append((label, mod.get_function(name), N, block, (X, W, B, LW, LB, O), (w, b, lw, lb)))
        else:  # an older golden graph: one weight and bias for both the affine and the layer norm
            runs.append((label, mod.get_function(name), N, block, (X, W, B, O), (w, b, w, b)))
    for blk, red in ((128, 0), (256, 0), (512, 0), (128, 1), (256, 1), (512, 1), (128, 2), (256, 2), (512, 2), (1024, 2)):
        runs.append((f"row b{blk} red{red}", vmod.get_function(f"ln_b{blk}_r{red}"), N, blk, (X, W, B, LW, LB, O), (w, b, lw, lb)))
    for blk, k_list in ((256, (1, 2)), (512, (1, 2)), (1024, (1, 2))):
        for wb in (0, 1):
            for k in k_list:
                runs.append((f"persistent b{blk} wb{wb} grid={k}x{sms}", vmod.get_function(f"lnp_b{blk}_w{wb}"), k * sms, blk,
                             (X, W, B, LW, LB, O, np.int32(N)), (w, b, lw, lb)))
    print("variant | regs | grid | block | us | TB/s | % of copy | relerr")
    for label, fn, grid, blk, args, params in runs:
        refp = reference(params)
        out.fill_(float("nan"))
        fn((grid,), (blk,), args)
        torch.cuda.synchronize()
        err = ((out.double() - refp).norm() / refp.norm()).item()
        if once:
            print(f"{label} | {fn.num_regs} | {grid} | {blk} | - | - | - | {err:.1e}")
            continue
        for _ in range(3):
            fn((grid,), (blk,), args)
        ts = []
        for _ in range(5):
            s, e = cp.cuda.Event(), cp.cuda.Event()
            s.record()
            for _ in range(50):
                fn((grid,), (blk,), args)
            e.record()
            e.synchronize()
            ts.append(cp.cuda.get_elapsed_time(s, e) / 50 * 1e3)
        us = statistics.median(ts)
        tbs = nbytes / (us * 1e-6) / 1e12
        print(f"{label} | {fn.num_regs} | {grid} | {blk} | {us:.1f} | {tbs:.2f} | {100 * tbs / ceiling:.0f}% | {err:.1e}")


if __name__ == "__main__":
    main()
