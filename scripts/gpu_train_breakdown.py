"""Where a training step's host time goes on a GPU, kiln beside eager (and inductor): the bench's
step (gradients cleared, forward, a float mean-square loss, backward) timed whole, then the
compiled call with and without grad and eager's forward alone, and the top Python functions of the
step under cProfile (kiln's training call and its backward node are C++: csrc/python/training_node.cpp).

    python3 scripts/gpu_train_breakdown.py train_mlp [--inductor] [--n 20]

Host times are measured with the GPU kept busy (gpu_common.host_us): the CPU work of a call. The
step's wall time (synchronized per step, median) says whether the step is bound by that work."""
import argparse
import cProfile
import pstats

import torch

import gpu_common  # noqa: E402  (kiln and the bench suite on sys.path)

import kiln  # noqa: E402
from suite import CASES  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case")
    ap.add_argument("--inductor", action="store_true")
    ap.add_argument("--n", type=int, default=20, help="steps per host-time round (launches stay under the queue depth)")
    a = ap.parse_args()
    torch.manual_seed(0)
    model, x, _ = CASES[a.case]("cuda")
    x = x if isinstance(x, tuple) else tuple(x)[0]
    cm = kiln.compile(model)
    steps = {"eager": gpu_common.training_step(model, model), "kiln": gpu_common.training_step(cm, model)}
    if a.inductor:
        steps["inductor"] = gpu_common.training_step(torch.compile(model), model)
    for name, step in steps.items():
        call = (lambda step: lambda: step(*x))(step)
        print(f"{name}: step wall {gpu_common.sync_ms(call, 30, 3):.3f} ms (synchronized, median), "
              f"host {gpu_common.host_us(call, a.n):.1f} us/step (GPU busy)")
    print("host us per call (GPU busy):")
    with torch.no_grad():
        print(f"  compiled call, no grad (inference graph): {gpu_common.host_us(lambda: cm(*x), a.n):.1f}")
    print(f"  compiled call with grad, no backward: {gpu_common.host_us(lambda: cm(*x), a.n):.1f}")
    print(f"  eager forward with grad, no backward: {gpu_common.host_us(lambda: model(*x), a.n):.1f}")
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(50):
        steps["kiln"](*x)
    torch.cuda.synchronize()
    pr.disable()
    pstats.Stats(pr).sort_stats("tottime").print_stats(20)


if __name__ == "__main__":
    main()
