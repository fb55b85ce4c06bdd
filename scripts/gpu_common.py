"""What the GPU scripts share: importing it puts kiln (this checkout) and the bench suite
(../shared/bench, or shared/bench where the device copy has it) on sys.path; cuda_ms_per_call times
a call with CUDA events, sync_ms a call synchronized on both sides, host_us the CPU time of a call
while the GPU is kept busy; device_rows / kernel_rows list device time per kernel under
torch.profiler; copy_ceiling is the device's copy bandwidth; training_step is the bench's
training step; case builds a bench case or one of the extra ones the scripts profile.
GPU_NO_CUDNN_SDPA=1 in the environment keeps SDPA from picking cuDNN attention (NO_CUDNN_SDP)."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _p in (os.path.join(ROOT, "..", "shared", "bench"), os.path.join(ROOT, "shared", "bench")):
    if os.path.isdir(_p):
        sys.path.insert(0, _p)
sys.path.insert(0, ROOT)

NO_CUDNN_SDP = os.environ.get("GPU_NO_CUDNN_SDPA") == "1"
if NO_CUDNN_SDP:
    import torch
    torch.backends.cuda.enable_cudnn_sdp(False)


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


def host_us(fn, n=50, rounds=5):
    """Host time per call while the GPU is busy (a long torch.cuda._sleep queued first), so no call
    waits for the device: the CPU work a call costs, in microseconds (median of `rounds` rounds of
    n calls; keep n calls' launches under the launch queue's depth, about a thousand)."""
    import statistics
    import time
    import torch
    ts = []
    for _ in range(rounds):
        torch.cuda.synchronize()
        torch.cuda._sleep(200_000_000)  # cycles: ~0.1 s of GPU time ahead of the calls
        t = time.perf_counter()
        for _ in range(n):
            fn()
        ts.append((time.perf_counter() - t) / n * 1e6)
        torch.cuda.synchronize()
    return statistics.median(ts)


def sync_ms(fn, n=50, warmup=0):
    """Median wall time of one call in ms, the device synchronized before and after each."""
    import statistics
    import time
    import torch
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(n):
        torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        ts.append((time.perf_counter() - t) * 1e3)
    return statistics.median(ts)


def device_rows(prof, iters):
    """Kernels and copies of a torch.profiler result over `iters` calls: (name, device us per call,
    launches per call), longest first. CUDA rows only (with host activity on, an operator's row
    counts its kernels' time too)."""
    from torch.autograd import DeviceType
    rows = [(e.key, e.device_time_total / iters, e.count // iters) for e in prof.key_averages()
            if e.device_time_total > 0 and e.device_type == DeviceType.CUDA]
    rows.sort(key=lambda r: -r[1])
    return rows


def kernel_rows(fn, args, iters=10):
    """device_rows of `iters` calls of fn(*args) (after 3 warm-up calls), the device alone profiled."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    for _ in range(3):
        fn(*args)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            fn(*args)
        torch.cuda.synchronize()
    return device_rows(prof, iters)


def copy_ceiling():
    """The device's own memory ceiling: a 256 MB device-to-device copy, bytes read plus written, in
    TB/s (median of 20 copies after 3 warm-up ones, each timed by CUDA events)."""
    import statistics
    import torch
    x = torch.randn(64 << 20, device="cuda")
    y = torch.empty_like(x)
    for _ in range(3):
        y.copy_(x)
    ts = []
    for _ in range(20):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        y.copy_(x)
        e.record()
        torch.cuda.synchronize()
        ts.append(s.elapsed_time(e))
    return 2 * x.numel() * 4 / statistics.median(ts) / 1e9


def training_step(fn, model):
    """The bench's training step on fn (model or its compiled form): gradients cleared, forward,
    a float mean-square loss, backward. Call it with the model's arguments."""
    import torch
    params = [p for p in model.parameters() if p.requires_grad]

    def step(*args):
        for p in params:
            p.grad = None
        out = fn(*args)
        out = out if isinstance(out, torch.Tensor) else out[0]
        out.float().pow(2).mean().backward()
    return step


def case(name):
    """(model, args tuple, training) on CUDA for a bench case, or for one of the sizes the bench
    lacks: nanogpt_b1 (NanoGPT 12L bf16, batch 1, 32 tokens: launch-bound decoding) and resnet50
    (fp32, batch 32; scripts/gpu_resnet50.py)."""
    import torch
    if name == "nanogpt_b1":
        from suite import NanoGPT
        return (NanoGPT(12, 768, 12).to("cuda", torch.bfloat16).eval(),
                (torch.randint(0, 8192, (1, 32), device="cuda"),), False)
    if name == "resnet50":
        import gpu_resnet50
        return gpu_resnet50.model()[0].cuda().eval(), (torch.randn(32, 3, 224, 224, device="cuda"),), False
    from suite import CASES
    model, args, training = CASES[name]("cuda")
    return model, args if isinstance(args, tuple) else tuple(args)[0], training
