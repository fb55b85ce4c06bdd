"""What the GPU scripts share: importing it puts kiln (this checkout) and the bench suite
(../shared/bench, or shared/bench where the device copy has it) on sys.path; cuda_ms_per_call times
a call with CUDA events."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _p in (os.path.join(ROOT, "..", "shared", "bench"), os.path.join(ROOT, "shared", "bench")):
    if os.path.isdir(_p):
        sys.path.insert(0, _p)
sys.path.insert(0, ROOT)


def cuda_ms_per_call(fn, args):
    """Median over 5 rounds of 20 back-to-back calls (after 3 warm-up calls), timed by CUDA events."""
    import torch
    for _ in range(3):
        fn(*args)
    torch.cuda.synchronize()
    walls = []
    for _ in range(5):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(20):
            fn(*args)
        e.record()
        torch.cuda.synchronize()
        walls.append(s.elapsed_time(e) / 20)
    return sorted(walls)[2]
