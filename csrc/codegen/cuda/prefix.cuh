// kiln's prefix header for generated CUDA kernels (embedded into every generated source and
// compiled by NVRTC). No includes: integer types are spelled as C++'s own (long long, not
// long long, which NVRTC does not define), and only CUDA's built-in math functions and warp
// intrinsics are used. The helpers have the names the op table
// (ir/loop_ops.h) spells, as the CPU prefix does; arithmetic on fp16/bf16 values runs in float.
#define KILN_DEV static __device__ __forceinline__
#define KILN_MATH1(name)                                                   \
  KILN_DEV float name(float x) { return ::name##f(x); }                    \
  KILN_DEV double name(double x) { return ::name(x); }                     \
  KILN_DEV double name(long long x) { return ::name(static_cast<double>(x)); } \
  KILN_DEV double name(int x) { return ::name(static_cast<double>(x)); } \
  KILN_DEV double name(short x) { return ::name(static_cast<double>(x)); } \
  KILN_DEV double name(signed char x) { return ::name(static_cast<double>(x)); } \
  KILN_DEV double name(unsigned char x) { return ::name(static_cast<double>(x)); } \
  KILN_DEV double name(bool x) { return ::name(static_cast<double>(x)); }
#define KILN_MATH2(name)                                                   \
  KILN_DEV float name(float x, float y) { return ::name##f(x, y); }        \
  KILN_DEV double name(double x, double y) { return ::name(x, y); }
namespace kiln {
namespace m {
KILN_MATH1(sqrt) KILN_MATH1(exp) KILN_MATH1(exp2) KILN_MATH1(expm1) KILN_MATH1(log) KILN_MATH1(log2)
KILN_MATH1(log10) KILN_MATH1(log1p) KILN_MATH1(sin) KILN_MATH1(cos) KILN_MATH1(tan) KILN_MATH1(asin)
KILN_MATH1(acos) KILN_MATH1(atan) KILN_MATH1(sinh) KILN_MATH1(cosh) KILN_MATH1(tanh) KILN_MATH1(erf)
KILN_MATH1(erfc) KILN_MATH1(floor) KILN_MATH1(ceil) KILN_MATH1(trunc) KILN_MATH1(nearbyint)
KILN_MATH2(pow) KILN_MATH2(fmod) KILN_MATH2(atan2) KILN_MATH2(copysign)
template <class T> KILN_DEV bool isinf(T x) { return x == x && (x - x) != (x - x); }
}  // namespace m
#undef KILN_MATH1
#undef KILN_MATH2

// The run's error flag: 2 = an integer division by zero. The first code stays (the runtime reads
// the flag after the graph's kernels and re-runs eagerly: eager's CUDA kernels divide by zero
// without an error, and the rerun gives their values).
KILN_DEV void fail(int* err, int code) { atomicCAS(err, 0, code); }
// An out-of-range indirect index is a device-side assertion, as in ATen's CUDA kernels (an
// embedding or gather with a bad index): the launch fails with "device-side assert triggered",
// reported by the next synchronizing call, and the context is unusable afterwards, as in eager.
// No flag, so no host synchronization per call. `__assertfail` is CUDA's device assert hook.
// CUDA's own headers declare the hook: NVRTC's (__assertfail, behind its `assert`) and nvcc's
// (glibc's __assert_fail, which the golden tests compile with).
#ifdef __CUDACC_RTC__
#define KILN_DEVICE_ASSERT_FAIL(msg) __assertfail(msg, "kiln generated kernel", 0, "kiln::checked_index", sizeof(char))
#else
#define KILN_DEVICE_ASSERT_FAIL(msg) __assert_fail(msg, "kiln generated kernel", 0, "kiln::checked_index")
#endif

// Storage types of 16-bit floats: bits only; values are computed in float.
struct alignas(2) bf16 { unsigned short bits; };
struct alignas(2) f16 { unsigned short bits; };
KILN_DEV float to_float(bf16 v) { return __uint_as_float(static_cast<unsigned int>(v.bits) << 16); }
// From sm_80 on, one cvt instruction rounds to nearest even (NaN becomes 0x7fff, as ATen's CUDA
// kernels give through __float2bfloat16); the integer rounding before it takes five, which made
// a bf16 kernel's conversions as costly as its arithmetic (test kernels of 8 bf16 elements per
// thread, PTX instructions: a scale 134 -> 62, an erf GELU 368 -> 296).
KILN_DEV bf16 to_bf16(float f) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  unsigned short h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return bf16{h};
#else
  unsigned int u = __float_as_uint(f);
  if (f != f) return bf16{0x7fc0};
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return bf16{static_cast<unsigned short>(u >> 16)};
#endif
}
KILN_DEV float to_float(f16 v) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v.bits));
  return f;
}
KILN_DEV f16 to_f16(float f) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return f16{h};
}
KILN_DEV float round_bf16(float f) { return to_float(to_bf16(f)); }
KILN_DEV double round_bf16(double f) { return f; }
KILN_DEV float round_f16(float f) { return to_float(to_f16(f)); }
KILN_DEV double round_f16(double f) { return f; }

// Elementwise math (CUDA's float functions are within 2 ulp; torch's CUDA kernels use the same).
KILN_DEV float exp(float x) { return ::expf(x); }
KILN_DEV double exp(double x) { return ::exp(x); }
KILN_DEV float tanh(float x) { return ::tanhf(x); }
KILN_DEV double tanh(double x) { return ::tanh(x); }
template <class T> KILN_DEV T sigmoid(T x) { return T(1) / (T(1) + kiln::exp(-x)); }
template <class T> KILN_DEV T gelu(T x) { return T(0.5) * x * (T(1) + m::erf(x * T(0.70710678118654752440))); }
template <class T> KILN_DEV T gelu_tanh(T x) {
  return T(0.5) * x * (T(1) + kiln::tanh(T(0.79788456080286535588) * (x + T(0.044715) * x * x * x)));
}
template <class T> KILN_DEV T gelu_grad(T x) {  // as ATen's gelu_backward: Phi(x) + x phi(x)
  return T(0.5) * (T(1) + m::erf(x * T(0.70710678118654752440))) + x * T(0.39894228040143267794) * kiln::exp(T(-0.5) * x * x);
}
template <class T> KILN_DEV T gelu_tanh_grad(T x) {
  const T beta = T(0.79788456080286535588), kappa = T(0.044715);
  const T t = kiln::tanh(beta * (x + kappa * x * x * x));
  return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * beta * (T(1) + T(3) * kappa * x * x);
}
template <class T> KILN_DEV T maxnan(T a, T b) { return a != a ? a : (b != b ? b : (a > b ? a : b)); }
template <class T> KILN_DEV T minnan(T a, T b) { return a != a ? a : (b != b ? b : (a < b ? a : b)); }
template <class T> KILN_DEV T fmaxv(T a, T b) { return a != a ? b : (b != b ? a : (a > b ? a : b)); }
template <class T> KILN_DEV T fminv(T a, T b) { return a != a ? b : (b != b ? a : (a < b ? a : b)); }
// |x|: the sign bit cleared for floats (abs(-0.) is +0., as eager's).
template <class T> KILN_DEV T abs_value(T x) { return x < T(0) ? T(-x) : x; }
KILN_DEV float abs_value(float x) { return fabsf(x); }
KILN_DEV double abs_value(double x) { return fabs(x); }
template <class T> KILN_DEV T relu(T x) { return x < T(0) ? T(0) : x; }
// A NaN bound gives NaN, as eager's clamp does (a NaN x stays x).
template <class T> KILN_DEV T clamp_lo(T x, T lo) { return x < lo || lo != lo ? lo : x; }
template <class T> KILN_DEV T clamp_hi(T x, T hi) { return x > hi || hi != hi ? hi : x; }
template <class T> KILN_DEV T sign(T x) { return T((T(0) < x) - (x < T(0))); }
template <class T> struct is_int { static constexpr bool value = false; };
template <> struct is_int<signed char> { static constexpr bool value = true; };
template <> struct is_int<unsigned char> { static constexpr bool value = true; };
template <> struct is_int<short> { static constexpr bool value = true; };
template <> struct is_int<int> { static constexpr bool value = true; };
template <> struct is_int<long long> { static constexpr bool value = true; };
template <> struct is_int<bool> { static constexpr bool value = true; };
template <class T> KILN_DEV T floordiv(T a, T b, int* err) {
  if constexpr (is_int<T>::value) {
    if (b == 0) { fail(err, 2); return 0; }
    T q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
  } else {
    // Floor division of floats as eager computes it: from fmod, so that a quotient just below an
    // integer in exact arithmetic is not rounded up by the division.
    if (b == 0) return a / b;
    T mod = m::fmod(a, b);
    T div = (a - mod) / b;
    if (mod != 0 && ((b < 0) != (mod < 0))) div -= T(1);
    if (div == 0) return m::copysign(T(0), a / b);
    T fl = m::floor(div);
    return div - fl > T(0.5) ? fl + T(1) : fl;
  }
}
template <class T> KILN_DEV T truncdiv(T a, T b, int* err) {
  if constexpr (is_int<T>::value) {
    if (b == 0) { fail(err, 2); return 0; }
    return a / b;
  } else {
    return m::trunc(a / b);
  }
}
template <class T> KILN_DEV T remainder(T a, T b, int* err) {
  if constexpr (is_int<T>::value) {
    if (b == 0) { fail(err, 2); return 0; }
    T r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
  } else {
    T r = m::fmod(a, b);
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
  }
}
template <class T> KILN_DEV T fmodv(T a, T b, int* err) {
  if constexpr (is_int<T>::value) {
    if (b == 0) { fail(err, 2); return 0; }
    return a % b;
  } else {
    return m::fmod(a, b);
  }
}
template <class T> KILN_DEV T powv(T a, T b) {
  if constexpr (is_int<T>::value) {
    if (b < 0) return a == 1 ? 1 : (a == -1 ? (b % 2 ? -1 : 1) : 0);
    T r = 1;
    while (b) { if (b & 1) r *= a; a *= a; b >>= 1; }
    return r;
  } else {
    if (b == T(2)) return a * a;
    if (b == T(0.5)) return m::sqrt(a);
    return m::pow(a, b);
  }
}
KILN_DEV long long checked_index(long long i, long long bound) {
  if (i < 0 || i >= bound) {
    KILN_DEVICE_ASSERT_FAIL("index out of range (kiln: an indirect index outside [0, size))");
    return 0;
  }
  return i;
}

// 16-byte (or narrower) vector accesses of V consecutive elements at an aligned address.
template <class T, int V> struct alignas(sizeof(T) * V) Vec { T v[V]; };
template <int V, class T> KILN_DEV Vec<T, V> load_vec(const T* p) { return *reinterpret_cast<const Vec<T, V>*>(p); }
template <int V, class T> KILN_DEV void store_vec(T* p, const Vec<T, V>& x) { *reinterpret_cast<Vec<T, V>*>(p) = x; }

// ---- reductions ---------------------------------------------------------------------------
// Partial results of threads are combined with shuffles (a warp) and then through shared memory
// (a block). Every thread ends with the combined value, so epilogues read it directly.
template <class T> KILN_DEV T shfl_xor(T v, int lane_mask) {
  if constexpr (sizeof(T) < 4) return static_cast<T>(__shfl_xor_sync(0xffffffffu, static_cast<int>(v), lane_mask));
  else return __shfl_xor_sync(0xffffffffu, v, lane_mask);
}
template <class T> struct WelfordState { T n, mean, m2; };
template <class T> KILN_DEV WelfordState<T> shfl_xor(WelfordState<T> s, int lane_mask) {
  return {shfl_xor(s.n, lane_mask), shfl_xor(s.mean, lane_mask), shfl_xor(s.m2, lane_mask)};
}
template <class T> struct ArgState { T v; long long i; };  // i < 0: nothing seen yet
template <class T> KILN_DEV ArgState<T> shfl_xor(ArgState<T> s, int lane_mask) {
  return {shfl_xor(s.v, lane_mask), shfl_xor(s.i, lane_mask)};
}
template <class T> KILN_DEV void welford_add(WelfordState<T>& s, T x) {
  s.n += T(1);
  T d = x - s.mean;
  s.mean += d / s.n;
  s.m2 += d * (x - s.mean);
}
template <class T> KILN_DEV WelfordState<T> welford_combine(WelfordState<T> a, WelfordState<T> b) {
  if (b.n == 0) return a;
  if (a.n == 0) return b;
  T n = a.n + b.n;
  T d = b.mean - a.mean;
  T w = b.n / n;  // one division
  return {n, a.mean + d * w, a.m2 + b.m2 + d * d * (a.n * w)};
}
// The V values of a vector group (V = 2, 4 or 8) folded into a state: their mean and the sum of
// squared deviations from it, two passes over registers, then one combine (per-element Welford
// steps divide once per element, a chain through the whole row).
template <class T, int V> KILN_DEV void welford_group(WelfordState<T>& s, const T (&x)[V]) {
  T sum = x[0];
#pragma unroll
  for (int k = 1; k < V; ++k) sum += x[k];
  const T mean = sum * (T(1) / T(V));
  T m2 = T(0);
#pragma unroll
  for (int k = 0; k < V; ++k) m2 += (x[k] - mean) * (x[k] - mean);
  s = welford_combine(s, WelfordState<T>{T(V), mean, m2});
}
// argmax/argmin: NaN beats every number; ties and NaNs keep the smallest position (eager's rule).
template <bool kMax, class T> KILN_DEV ArgState<T> arg_combine(ArgState<T> a, ArgState<T> b) {
  if (b.i < 0) return a;
  if (a.i < 0) return b;
  bool take;
  if (a.v != a.v) take = b.v != b.v && b.i < a.i;
  else if (b.v != b.v) take = true;
  else take = kMax ? (b.v > a.v || (b.v == a.v && b.i < a.i)) : (b.v < a.v || (b.v == a.v && b.i < a.i));
  return take ? b : a;
}
template <class T, class F> KILN_DEV T warp_allreduce(T v, F combine) {
  for (int o = 16; o > 0; o >>= 1) v = combine(v, shfl_xor(v, o));
  return v;
}
// A block of kWarps warps (the generator knows its block size): `smem` holds one value per warp.
// Every thread of the block must call it.
template <int kWarps, class T, class F> KILN_DEV T block_allreduce(T v, F combine, T* smem) {
  v = warp_allreduce(v, combine);
  __syncthreads();  // an earlier use of smem is over
  if ((threadIdx.x & 31) == 0) smem[threadIdx.x >> 5] = v;
  __syncthreads();
  v = smem[0];
#pragma unroll
  for (int w = 1; w < kWarps; ++w) v = combine(v, smem[w]);
  return v;
}
// Mean and M2 (sum of squared deviations) of a block's row in one round: each thread brings those
// of its own kCount values, combined by Chan's formula with every count known at compile time
// (equal in the warps' butterflies, warp w joining the w before it), so no division; the plain
// two passes reduce twice (the row's sum, then the squared deviations from its mean).
template <class T> struct Moments { T mean, m2; };
template <int kWarps, int kCount, class T> KILN_DEV Moments<T> block_moments(Moments<T> a, Moments<T>* smem) {
  T c = T(kCount);
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const T mb = shfl_xor(a.mean, o), qb = shfl_xor(a.m2, o), d = mb - a.mean;
    a = {T(0.5) * (a.mean + mb), a.m2 + qb + d * d * (T(0.5) * c)};
    c *= T(2);
  }
  __syncthreads();  // an earlier use of smem is over
  if ((threadIdx.x & 31) == 0) smem[threadIdx.x >> 5] = a;
  __syncthreads();
  a = smem[0];
#pragma unroll
  for (int w = 1; w < kWarps; ++w) {
    const T d = smem[w].mean - a.mean;
    a = {a.mean + d * (T(1) / T(w + 1)), a.m2 + smem[w].m2 + d * d * (T(32 * kCount) * T(w) / T(w + 1))};
  }
  return a;
}
}  // namespace kiln
#define KILN_KERNEL extern "C" __global__

// Autotuning's timer aid (runtime/cuda_kernels.cpp): one thread waits `ns` nanoseconds of the
// GPU's global timer, so that the launches queued behind it are all queued before the GPU reaches
// them and the events around them time the kernels, not the host's launch rate.
KILN_KERNEL void kiln_spin(long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (static_cast<long long>(t - t0) < ns);
}
