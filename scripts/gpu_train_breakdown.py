"""Where a training step's host time goes on a GPU, kiln beside eager (and inductor): the bench's
step (gradients cleared, forward, a float mean-square loss, backward) timed whole, then the
compiled call with and without grad and eager's forward alone, and the top Python functions of the
step under cProfile (kiln's training call and its backward node are C++: csrc/python/codegen_graph/training_node.cpp).

    python3 scripts/gpu_train_breakdown.py train_mlp [--inductor] [--n 20] [--timeline]

--timeline: one synchronized step of each under torch.profiler: when its first kernel started
after the step began, the device's busy time, and the longest idle gaps between kernels with the
host operator that was running when each gap began (what the device waited for).

Host times are measured with the GPU kept busy (gpu_common.host_us): the CPU work of a call. The
step's wall time (synchronized per step, median) says whether the step is bound by that work."""
import argparse
import cProfile
import pstats

import torch

import gpu_common  # noqa: E402  (kiln and the bench suite on sys.path)

import kiln  # noqa: E402
from suite import CASES  # noqa: E402


def timeline(name, call):
    from torch.profiler import ProfilerActivity, profile, record_function
    for _ in range(5):
        call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for i in range(3):
            torch.cuda.synchronize()
            with record_function(f"step{i}"):
                call()
                torch.cuda.synchronize()
    evs = prof.events()
    span = lambda e: (e.time_range.start, e.time_range.end)  # noqa: E731  (us)
    step = max((e for e in evs if e.name == "step2"), key=lambda e: e.time_range.end)
    s0, s1 = span(step)
    cuda = torch.autograd.DeviceType.CUDA
    ks = sorted((e for e in evs if e.device_type == cuda and s0 <= e.time_range.start <= s1), key=lambda e: e.time_range.start)
    host = [e for e in evs if e.device_type != cuda and s0 <= e.time_range.start <= s1 and e.name != "step2"]
    if not ks:
        print(f"  {name}: no kernels in the step")
        return
    busy, end, gaps = 0.0, ks[0].time_range.start, []
    for k in ks:
        a, b = span(k)
        if a > end:
            gaps.append((a - end, end, k.name))
        busy += max(0.0, b - max(a, end))
        end = max(end, b)

    def running(t):
        inside = [e for e in host if e.time_range.start <= t <= e.time_range.end]
        return min(inside, key=lambda e: e.time_range.end - e.time_range.start).name if inside else "-"
    print(f"  {name}: step {s1 - s0:.0f} us, first kernel at +{ks[0].time_range.start - s0:.0f} us ({running(ks[0].time_range.start - 1)} before it), "
          f"last kernel ends +{end - s0:.0f} us, device busy {busy:.0f} us over {len(ks)} kernels, idle gaps {sum(g[0] for g in gaps):.0f} us")
    for g, at, before in sorted(gaps, reverse=True)[:6]:
        print(f"    gap {g:6.1f} us at +{at - s0:6.0f} before {before[:50]}; host in {running(at + 1)[:60]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case")
    ap.add_argument("--inductor", action="store_true")
    ap.add_argument("--n", type=int, default=20, help="steps per host-time round (launches stay under the queue depth)")
    ap.add_argument("--timeline", action="store_true")
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
    if a.timeline:
        print("one synchronized step, device timeline:")
        for name, step in steps.items():
            timeline(name, (lambda step: lambda: step(*x))(step))
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
