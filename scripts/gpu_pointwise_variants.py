"""Where a large bf16 pointwise kernel loses to Triton's (an H200 profile of the bench's hf_llama:
kiln's silu(gate) * up over 4 x 512 x 5632 bf16, 20.7 us per call, Triton's 15.7 us): the same
computation hand-written in variants (math as kiln's prefix writes it, or with fast intrinsics;
bf16 rounding by integer arithmetic or one cvt instruction; 8 or 16 elements per thread; block sizes), compiled by NVRTC through CuPy, checked against
PyTorch and timed with CUDA events (gpu_common.cuda_ms_per_call).

    python3 scripts/gpu_pointwise_variants.py"""
import cupy as cp
import gpu_common  # timing by CUDA events
import torch
import torch.nn.functional as F

SRC = r"""
typedef unsigned short bf16;
__device__ __forceinline__ float f(bf16 v) { return __uint_as_float(((unsigned)v) << 16); }
__device__ __forceinline__ bf16 b(float x) {
#if CVT
  bf16 h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(x));
  return h;
#endif
  unsigned u = __float_as_uint(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (bf16)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (bf16)(u >> 16);
}
struct __align__(16) V8 { bf16 v[8]; };
__device__ __forceinline__ float act(float x) {
#if FAST == 1
  return x * __frcp_rn(1.0f + __expf(-x));
#elif FAST == 2
  return x * __fdividef(1.0f, 1.0f + __expf(-x));
#else
  return x * (1.0f / (1.0f + expf(-x)));
#endif
}
extern "C" __global__ void k(const bf16* __restrict__ g, const bf16* __restrict__ u, bf16* __restrict__ o, int n8) {
  const int i0 = blockIdx.x * blockDim.x * PER + threadIdx.x;  // a warp's accesses stay contiguous
  V8 a[PER], c[PER], r[PER];
  #pragma unroll
  for (int p = 0; p < PER; ++p) {
    const int i = i0 + p * blockDim.x;
    if (i < n8) { a[p] = reinterpret_cast<const V8*>(g)[i]; c[p] = reinterpret_cast<const V8*>(u)[i]; }
  }
  #pragma unroll
  for (int p = 0; p < PER; ++p) {
    #pragma unroll
    for (int j = 0; j < 8; ++j) r[p].v[j] = b(act(f(a[p].v[j])) * f(c[p].v[j]));
  }
  #pragma unroll
  for (int p = 0; p < PER; ++p)
    if (i0 + p * blockDim.x < n8) reinterpret_cast<V8*>(o)[i0 + p * blockDim.x] = r[p];
}
"""


def main():
    rows, cols = 4 * 512, 5632
    gate = torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16)
    up = torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16)
    ref = F.silu(gate) * up
    n8 = gate.numel() // 8
    mb = 3 * gate.numel() * 2 / 1e6
    arch = "".join(map(str, torch.cuda.get_device_capability()))
    for fast, cvt, label in ((0, 0, "accurate, integer rounding"), (0, 1, "accurate, cvt rounding"), (1, 1, "__expf + __frcp_rn, cvt"),
                             (2, 1, "__expf + __fdividef, cvt")):
        for per in (1, 2):
            for block in (128, 256):
                try:
                    mod = cp.RawModule(code=SRC, options=(f"--gpu-architecture=sm_{arch}", f"-DFAST={fast}", f"-DPER={per}", f"-DCVT={cvt}"))
                    kern = mod.get_function("k")
                except Exception as exc:  # noqa: BLE001  (the compiler's log, then the next variant)
                    print(label, per, block, "failed:", str(exc)[:2000])
                    continue
                out = torch.empty_like(gate)
                grid = (n8 + block * per - 1) // (block * per)
                args = (cp.uint64(gate.data_ptr()), cp.uint64(up.data_ptr()), cp.uint64(out.data_ptr()), cp.int32(n8))

                def launch():
                    kern((grid,), (block,), args)

                launch()
                torch.cuda.synchronize()
                err = (out.float() - ref.float()).abs().max().item()
                exact = (out.view(torch.int16) == ref.view(torch.int16)).float().mean().item()
                us = gpu_common.cuda_ms_per_call(launch, ()) * 1e3
                print(f"{label:28} per-thread {per * 8:2} elems block {block:3}: {us:6.1f} us  {mb / us:5.2f} TB/s  "
                      f"max err {err:.3g}, bit-equal to eager {exact * 100:.3f}%")
    eager_us = gpu_common.cuda_ms_per_call(lambda: torch.mul(F.silu(gate), up), ()) * 1e3
    print(f"eager silu + mul (two kernels): {eager_us:.1f} us")

if __name__ == "__main__":
    main()
