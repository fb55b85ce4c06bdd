"""Where a training step's host time goes on a GPU, kiln beside eager (and inductor): the bench's
step (gradients cleared, forward, a float mean-square loss, backward) timed whole, then kiln's
pieces alone: the compiled forward and backward graphs called directly (TrainingStages.forward /
backward), the autograd node's forward without a backward, and the top Python functions of the
step under cProfile.

    python3 scripts/gpu_train_breakdown.py train_mlp [--inductor] [--n 20]

Host times are measured with the GPU kept busy (gpu_common.host_us): the CPU work of a call. The
step's wall time (synchronized per step, median) says whether the step is bound by that work."""
import argparse
import cProfile
import pstats
import statistics
import time

import torch

import gpu_common  # noqa: E402  (kiln and the bench suite on sys.path)

import kiln  # noqa: E402
from kiln import _autograd  # noqa: E402
from suite import CASES  # noqa: E402


def wall_ms(fn, n=30):
    ts = []
    for _ in range(3):
        fn()
    for _ in range(n):
        torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        ts.append((time.perf_counter() - t) * 1e3)
    return statistics.median(ts)


def make_step(fn, model, x):
    params = [p for p in model.parameters() if p.requires_grad]

    def step():
        for p in params:
            p.grad = None
        out = fn(*x)
        out = out if isinstance(out, torch.Tensor) else out[0]
        out.float().pow(2).mean().backward()
    return step


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case")
    ap.add_argument("--inductor", action="store_true")
    ap.add_argument("--n", type=int, default=20, help="steps per host-time round (launches stay under the queue depth)")
    a = ap.parse_args()
    torch.manual_seed(0)
    model, x, _ = CASES[a.case]("cuda")
    x = x if isinstance(x, tuple) else tuple(x)[0]
    seen = {}
    real_run, real_forward = _autograd.run, _autograd._Forward.__init__

    def spy_run(stages, *inputs):
        seen["stages"], seen["inputs"] = stages, list(inputs)
        return real_run(stages, *inputs)

    def spy_forward(self, stages, inputs):
        real_forward(self, stages, inputs)
        seen["fw"] = self
    _autograd.run, _autograd._Forward.__init__ = spy_run, spy_forward
    cm = kiln.compile(model)
    steps = {"eager": make_step(model, model, x), "kiln": make_step(cm, model, x)}
    if a.inductor:
        steps["inductor"] = make_step(torch.compile(model), model, x)
    for name, step in steps.items():
        print(f"{name}: step wall {wall_ms(step):.3f} ms (synchronized, median), host {gpu_common.host_us(step, a.n):.1f} us/step (GPU busy)")
    _autograd.run, _autograd._Forward.__init__ = real_run, real_forward
    st, inputs, fw = seen["stages"], seen["inputs"], seen["fw"]
    n_fwd = len(fw.outputs)
    print(f"kiln pieces (host us per call, GPU busy): {st.describe}")
    with torch.no_grad():
        print(f"  stages.forward alone: {gpu_common.host_us(lambda: st.forward(list(inputs)), a.n):.1f}")
        saved = [t.detach() for t in fw.aliases]
        tangents = [torch.randn(s, dtype=d, device=dev) for s, d, dev in fw.tangent_meta]
        print(f"  stages.backward alone: {gpu_common.host_us(lambda: st.backward(saved + tangents), a.n):.1f}")
        outs = st.forward(list(inputs))
        print(f"  _saved_aliases of {len(outs) - n_fwd} saved outputs: {gpu_common.host_us(lambda: kiln._C._saved_aliases(outs[n_fwd:]), a.n):.1f}")
        print(f"  compiled call, no grad (inference graph): {gpu_common.host_us(lambda: cm(*x), a.n):.1f}")
    print(f"  compiled call with grad, no backward: {gpu_common.host_us(lambda: cm(*x), a.n):.1f}")
    print(f"  eager forward with grad, no backward: {gpu_common.host_us(lambda: model(*x), a.n):.1f}")
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(50):
        steps["kiln"]()
    torch.cuda.synchronize()
    pr.disable()
    pstats.Stats(pr).sort_stats("tottime").print_stats(20)


if __name__ == "__main__":
    main()
