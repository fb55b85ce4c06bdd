"""NanoGPT's (12L, d 768, b8 s512, bf16) matmuls with and without their epilogues, eager ATen on a
GPU: addmm + gelu(tanh) against _addmm_activation (cuBLASLt's bias+GELU epilogue) and mm + a
separate bias/GELU pass; each timed as a CUDA graph replay (median of 20 x 20 replays).

    python3 scripts/gpu_matmul_epilogue.py [rows ...]    (default 4096 = b8 x s512; 32 = b1 x s32)"""
import statistics
import sys

import torch
import torch.nn.functional as F


def bench(fn):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    ts = []
    for _ in range(20):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(20):
            g.replay()
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b) / 20 * 1e3)
    return statistics.median(ts)


def main():
    torch.manual_seed(0)
    print(torch.cuda.get_device_name(), torch.__version__)
    for m in [int(a) for a in sys.argv[1:]] or [8 * 512]:
        matmuls(m)
    attention_and_copy()


def matmuls(m):
    dt = torch.bfloat16
    for name, k, n, act in (("qkv", 768, 2304, False), ("proj", 768, 768, False), ("fc", 768, 3072, True), ("out", 3072, 768, False),
                            ("head", 768, 8192, None)):
        x = torch.randn(m, k, device="cuda", dtype=dt)
        w = torch.randn(n, k, device="cuda", dtype=dt) / k ** 0.5
        b = torch.randn(n, device="cuda", dtype=dt)
        flops = 2 * m * n * k
        row = {"mm": bench(lambda: torch.mm(x, w.t()))}
        if act is not None:
            row["addmm"] = bench(lambda: torch.addmm(b, x, w.t()))
        if act:
            row["addmm+gelu"] = bench(lambda: F.gelu(torch.addmm(b, x, w.t()), approximate="tanh"))
            row["_addmm_activation"] = bench(lambda: torch._addmm_activation(b, x, w.t(), use_gelu=True))
            ref = F.gelu(torch.addmm(b, x, w.t()).float(), approximate="tanh")
            got = torch._addmm_activation(b, x, w.t(), use_gelu=True).float()
            row["relerr"] = ((got - ref).norm() / ref.norm()).item()
        print(f"{name:5s} {m}x{k}x{n}: " + ", ".join(f"{key} {v:.1f} us" if key != "relerr" else f"{key} {v:.1e}" for key, v in row.items())
              + f"  (mm at {flops / row['mm'] / 1e6:.0f} TFLOP/s)")


def attention_and_copy():
    dt = torch.bfloat16
    # attention: 96 heads of 512x64
    q = torch.randn(8, 12, 512, 64, device="cuda", dtype=dt)
    att = q @ q.transpose(-2, -1)
    mask = torch.ones(512, 512, dtype=torch.bool, device="cuda").tril()
    print(f"att q@kT {bench(lambda: q @ q.transpose(-2, -1)):.1f} us; att@v {bench(lambda: att @ q):.1f} us; "
          f"scale+mask+softmax eager {bench(lambda: (att * 0.125).masked_fill(~mask, float('-inf')).softmax(-1)):.1f} us; "
          f"sdpa causal {bench(lambda: F.scaled_dot_product_attention(q, q, q, is_causal=True)):.1f} us")
    big = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(big)
    us = bench(lambda: dst.copy_(big))
    print(f"copy 256 MiB: {us:.1f} us = {2 * big.numel() / us / 1e6:.2f} TB/s (read + write)")


if __name__ == "__main__":
    main()
