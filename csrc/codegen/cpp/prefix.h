// kiln's prefix header for generated CPU kernels (embedded into every generated source).
// Small on purpose: standard headers only, no ATen, so a graph compiles in well under a second.
// float exp/tanh/erf are written branch-free so loops that use them vectorize.
#include <cstdint>
#include <type_traits>
// libm through the compiler's builtins instead of <cmath>, whose parsing alone costs about
// 0.25 s per compile: float and double overloads, integers computed in double (as std:: does).
#define KILN_MATH1(name)                                                                   \
  static inline float name(float x) { return __builtin_##name##f(x); }                      \
  static inline double name(double x) { return __builtin_##name(x); }                       \
  template <class T, class = typename std::enable_if<std::is_integral<T>::value>::type>     \
  static inline double name(T x) { return __builtin_##name(static_cast<double>(x)); }
#define KILN_MATH2(name)                                                                   \
  static inline float name(float x, float y) { return __builtin_##name##f(x, y); }          \
  static inline double name(double x, double y) { return __builtin_##name(x, y); }
namespace kiln::m {
KILN_MATH1(sqrt) KILN_MATH1(exp) KILN_MATH1(exp2) KILN_MATH1(expm1) KILN_MATH1(log) KILN_MATH1(log2)
KILN_MATH1(log10) KILN_MATH1(log1p) KILN_MATH1(sin) KILN_MATH1(cos) KILN_MATH1(tan) KILN_MATH1(asin)
KILN_MATH1(acos) KILN_MATH1(atan) KILN_MATH1(sinh) KILN_MATH1(cosh) KILN_MATH1(tanh) KILN_MATH1(erf)
KILN_MATH1(erfc) KILN_MATH1(floor) KILN_MATH1(ceil) KILN_MATH1(trunc) KILN_MATH1(nearbyint)
KILN_MATH2(pow) KILN_MATH2(fmod) KILN_MATH2(atan2) KILN_MATH2(copysign)
template <class T> static inline bool isinf(T x) { return __builtin_isinf(x); }
}  // namespace kiln::m
#undef KILN_MATH1
#undef KILN_MATH2
#define KILN_EXPORT extern "C" __attribute__((visibility("default")))
namespace kiln {
// A kernel that meets an out-of-range index (1) or an integer division by zero (2) records it
// in the calling run's own flag (the last entry of its buffer table), so concurrent runs of one
// graph never see each other's errors.
// Generated code compiles with -ffp-contract=off, so each a * b + c rounds twice, as eager's
// operators do (a value computed again in another loop, x - max(x) in softmax, is then equal to
// eager's bit for bit). The polynomials below ask for their fused multiply-adds explicitly, as
// ATen's vectorized math does.
static inline float madd(float a, float b, float c) {
#if defined(__FMA__) || defined(__aarch64__)
  return __builtin_fmaf(a, b, c);
#else
  return a * b + c;
#endif
}
static inline void fail(int* err, int code) { __atomic_store_n(err, code, __ATOMIC_RELAXED); }
struct bf16 { uint16_t bits; };
static inline float to_float(bf16 v) { uint32_t u = static_cast<uint32_t>(v.bits) << 16; float f; __builtin_memcpy(&f, &u, 4); return f; }
static inline bf16 to_bf16(float f) {
  uint32_t u; __builtin_memcpy(&u, &f, 4);
  if (f != f) return bf16{0x7fc0};
  u += 0x7fffu + ((u >> 16) & 1u);
  return bf16{static_cast<uint16_t>(u >> 16)};
}
static inline float round_bf16(float f) { return to_float(to_bf16(f)); }
static inline double round_bf16(double f) { return f; }
// float exp (aten::exp): branch-free (selects only), so loops that use it vectorize, and correctly
// rounded but on about one input in a thousand (exact value within ~1e-3 ulp of a rounding
// boundary), subnormal results included. torch.exp's float exp (MKL's where ATen has MKL) is
// correctly rounded on about 99% of inputs: the two agree there and are never more than 1 ulp apart.
#if defined(__FP_FAST_FMAF) || defined(__FMA__) || defined(__aarch64__)
static inline float exp(float x) {
  // x = n ln2 + r + d, n = rint(x / ln2): adding 1.5 * 2^23 makes the fma round x / ln2 to an
  // integer, left in kf's low mantissa bits. LN2_HI = 0x1.62e43p-1 is ln2 rounded to float, so the
  // second fma gives r = x - n LN2_HI exactly (|r| <= ln2/2), and d = n (LN2_HI - ln2) is tiny.
  float kf = __builtin_fmaf(x, 0x1.715476p+0f, 0x1.8p23f);
  float nf = kf - 0x1.8p23f;
  float r = __builtin_fmaf(nf, -0x1.62e43p-1f, x);
  float d = nf * 0x1.05c61p-29f;
  // The scale takes n clamped at -149. At n = -150 (x in [-104.3, -103.6]) the result is 2^-149
  // when r >= 0, which the subnormal path below gives with n = -149 (exp(r) rounds to one unit of
  // 2^-149 there); when r < 0, and below, it is 0 (the select at the end).
  uint32_t kb; __builtin_memcpy(&kb, &kf, 4);
  int32_t n = static_cast<int32_t>(kb - 0x4b400000u);
  n = n < -149 ? -149 : n;
  // A subnormal result (exp(x) < 2^-126) is rounded once, as exp(x) + 2^-126 = 2^n (exp(r + d) + c)
  // with c = 2^(-126-n): a normal float whose last bit is the subnormal's last bit.
  bool sub = x < -0x1.5d589ep+6f;
  uint32_t cb = sub ? static_cast<uint32_t>(1 - n) << 23 : 0u;
  float c; __builtin_memcpy(&c, &cb, 4);
  // exp(r + d) + c = (1 + c) + r + r^2/2 + r^3 q(r) + d exp(r) as b + small terms: the first three
  // are summed keeping their rounding errors (e1 exact, e2 to float precision), so the last
  // addition is the one rounding that matters. q: minimax polynomial for
  // (exp(r) - 1 - r - r^2/2) / r^3 on [-ln2/2, ln2/2].
  float one = 1.0f + c;
  float a = one + r;
  float e1 = (one - a) + r;
  float hr = 0.5f * r;
  float b = __builtin_fmaf(hr, r, a);
  float e2 = __builtin_fmaf(hr, r, a - b);
  float q = __builtin_fmaf(__builtin_fmaf(__builtin_fmaf(__builtin_fmaf(0x1.9dd556p-13f, r, 0x1.6d4eccp-10f), r, 0x1.111334p-7f), r, 0x1.5554e6p-5f), r, 0x1.555554p-3f);
  float t = __builtin_fmaf(r * r * r, q, e1 + e2);
  float y = b + __builtin_fmaf(d, (b - c) + t, t);
  // Times 2^n through the exponent bits; on the subnormal path one less, which takes 2^-126 off:
  // y 2^n is in [2^-126, 2^-125] there, and its mantissa with a zero exponent is the subnormal.
  uint32_t yb; __builtin_memcpy(&yb, &y, 4);
  yb += static_cast<uint32_t>(sub ? n - 1 : n) << 23;
  __builtin_memcpy(&y, &yb, 4);
  y = x < -0x1.9fe368p+6f ? 0.0f : y;                     // exp(x) <= 2^-150 rounds to 0
  return x <= 0x1.62e42ep+6f ? y : x * __builtin_inff();  // past the largest finite result: inf; NaN
}
#else
static inline float exp(float x) {
  // Without a hardware fma: in double, exp(x) = 2^n p(r) with relative error < 1e-12, rounded to
  // float once. p: minimax polynomial for exp on [-ln2/2, ln2/2].
  double xd = x;
  double kd = xd * 0x1.71547652b82fep0 + 0x1.8p52;  // rint(x / ln2) in the low mantissa bits
  double r = xd - (kd - 0x1.8p52) * 0x1.62e42fefa39efp-1;
  double p = 0x1.9ed9f205d3b4bp-16;
  p = p * r + 0x1.a1a8e6b6189f9p-13;
  p = p * r + 0x1.6c18b535e08ccp-10;
  p = p * r + 0x1.1110821e49437p-7;
  p = p * r + 0x1.555554030dd04p-5;
  p = p * r + 0x1.555555a0f465fp-3;
  p = p * r + 0x1.000000008909dp-1;
  p = p * r + 0x1.ffffffffd50d0p-1;
  p = p * r + 0x1.ffffffffff78ep-1;
  uint64_t kb, pb; __builtin_memcpy(&kb, &kd, 8); __builtin_memcpy(&pb, &p, 8);
  pb += kb << 52;
  __builtin_memcpy(&p, &pb, 8);
  float y = static_cast<float>(p);
  y = x < -104.0f ? 0.0f : y;
  return x <= 0x1.62e42ep+6f ? y : x * __builtin_inff();
}
#endif
static inline double exp(double x) { return m::exp(x); }
// The float exp inside ATen's vectorized kernels (Vectorized<float>::exp, in sigmoid and silu) is
// not the one torch.exp uses (MKL's, where ATen has MKL) and is less often correctly rounded.
// This one (kiln's float exp before the one above: Cody-Waite reduction, Cephes polynomial) rounds
// like it on about 99% of inputs, so kiln's sigmoid keeps matching ATen's.
// exp(c - n ln2) for an integer-valued n near c / ln2: Cody-Waite reduction (ln2 in two parts)
// and the Cephes polynomial.
static inline float exp_reduced(float c, float n) {
  float r = madd(n, -0.693359375f, c);
  r = madd(n, 2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = madd(p, r, 1.3981999507e-3f);
  p = madd(p, r, 8.3334519073e-3f);
  p = madd(p, r, 4.1665795894e-2f);
  p = madd(p, r, 1.6666665459e-1f);
  p = madd(p, r, 5.0000001201e-1f);
  return madd(p * r, r, r) + 1.0f;
}
static inline float exp_vec(float x) {
  // Clamped to [-104, 89] by one max and one min; NaN fails `x > -104` and is reduced as -104 (the
  // result is x itself): converting NaN to an int is undefined. Bit for bit the same results as
  // the select chain this replaced (checked over all 2^32 floats), in 2 instructions instead of 7.
  float c = x > -104.0f ? x : -104.0f;
  c = c < 89.0f ? c : 89.0f;
  float n = m::floor(madd(c, 1.44269504088896341f, 0.5f));
  float p = exp_reduced(c, n);
  int32_t e = static_cast<int32_t>(n);
  int32_t e1 = e >> 1, e2 = e - e1;
  // Shifted as unsigned: a biased exponent below 0 (an input far below -87) is a negative int.
  uint32_t b1 = static_cast<uint32_t>(e1 + 127) << 23, b2 = static_cast<uint32_t>(e2 + 127) << 23;
  float s1, s2;
  __builtin_memcpy(&s1, &b1, 4);
  __builtin_memcpy(&s2, &b2, 4);
  float y = p * s1 * s2;
  return x != x ? x : y;
}
static inline double exp_vec(double x) { return m::exp(x); }
static inline float tanh(float x) {
  float x2 = x * x;
  float p = 0.0014558343870513183f;  // odd Taylor series of tanh up to x^15
  p = madd(p, x2, -0.0035921280365724811f);
  p = madd(p, x2, 0.0088632355299021965f);
  p = madd(p, x2, -0.021869488536155203f);
  p = madd(p, x2, 0.053968253968253968f);
  p = madd(p, x2, -0.13333333333333333f);
  p = madd(p, x2, 0.33333333333333333f);
  // The sign of x: the fma gives +0 for x = -0 (+0 + -0), where tanh(-0) is -0.
  float small = __builtin_copysignf(madd(-(x * x2), p, x), x);
  // Odd by construction, from |x|: 1 - 2 / (exp(2x) + 1) for x < 0 rounds exp(2x) + 1 near 1 and
  // loses exp(2x)'s bits, up to 3 ulp off (tanh(-8.32) came out -1, eager's -0.99999988; `.int()`
  // of it then -1 vs 0: fuzz seed 14475); from |x|, 1.5 ulp at most, as for x > 0.
  float big = __builtin_copysignf(1.0f - 2.0f / (kiln::exp(2.0f * __builtin_fabsf(x)) + 1.0f), x);
  return (x < 0.55f && x > -0.55f) ? small : big;
}
static inline double tanh(double x) { return m::tanh(x); }
// exp(z) for z <= 0, within about 2 ulp, in few operations (no overflow handling, no subnormal
// results: 0 below -87): the Gaussian factors of normal_cdf and of gelu's density.
// A NaN gives an unspecified result (its callers carry NaN through their other factor).
static inline float exp_nonpositive(float z) {
  const float zc = z < -87.0f ? -87.0f : z;
  float kf = madd(zc, 1.44269504088896341f, 0x1.8p23f);  // rint(z / ln2) in the low mantissa bits
  float p = exp_reduced(zc, kf - 0x1.8p23f);
  uint32_t kb, pb;
  __builtin_memcpy(&kb, &kf, 4);
  __builtin_memcpy(&pb, &p, 4);
  pb += (kb - 0x4b400000u) << 23;  // times 2^n through the exponent bits (n in [-126, 0])
  __builtin_memcpy(&p, &pb, 4);
  return z < -87.0f ? 0.0f : p;
}
// Functions outside their domain give a NaN whose sign bit is eager's (torch.copysign and
// torch.signbit read it; fuzz seed 6252: copysign(a, softmax(log(t / s)) * 0) with s < 0). libm's
// NaN there is x86's default NaN, sign bit set, where ATen's x86 kernels (MKL / Sleef, vector and
// tail alike) give +NaN for log, log2, log10 and sqrt of x < 0 (-inf included), and the default NaN
// for acos / asin of |x| > 1 and float log1p of x < -1, +NaN for double log1p (of a NaN too).
// Otherwise a NaN input stays itself, sign included, in both. rsqrt keeps libm's sqrt: ATen's
// 1 / sqrt gives the default NaN. (Functions whose NaN sign eager gives differently in its vector
// loop and in its scalar tail, fmod, pow(x < 0, 1.5), are left as libm gives them; and GCC does
// not keep NaN signs through every rewrite: 1 + -x becomes 1 - x.)
static inline float nan_pos(float) { return __builtin_nanf(""); }
static inline double nan_pos(double) { return __builtin_nan(""); }
#define KILN_NAN_BELOW_ZERO(name)                                                                  \
  template <class T> static inline auto name(T x) -> decltype(m::name(x)) {                         \
    using R = decltype(m::name(x));                                                                  \
    return x < T(0) ? nan_pos(R(0)) : m::name(x);                                                    \
  }
KILN_NAN_BELOW_ZERO(log) KILN_NAN_BELOW_ZERO(log2) KILN_NAN_BELOW_ZERO(log10) KILN_NAN_BELOW_ZERO(sqrt)
#undef KILN_NAN_BELOW_ZERO
#if defined(__x86_64__) || defined(__i386__)
template <class T> static inline auto acos(T x) -> decltype(m::acos(x)) {
  using R = decltype(m::acos(x));
  return x > T(1) || x < T(-1) ? -nan_pos(R(0)) : m::acos(x);
}
template <class T> static inline auto asin(T x) -> decltype(m::asin(x)) {
  using R = decltype(m::asin(x));
  return x > T(1) || x < T(-1) ? -nan_pos(R(0)) : m::asin(x);
}
template <class T> static inline auto log1p(T x) -> decltype(m::log1p(x)) {
  using R = decltype(m::log1p(x));
  if constexpr (std::is_same<R, float>::value) return x < T(-1) ? -nan_pos(R(0)) : m::log1p(x);
  else return !(x >= T(-1)) ? nan_pos(R(0)) : m::log1p(x);  // a NaN input too
}
#else
template <class T> static inline auto acos(T x) -> decltype(m::acos(x)) { return m::acos(x); }
template <class T> static inline auto asin(T x) -> decltype(m::asin(x)) { return m::asin(x); }
template <class T> static inline auto log1p(T x) -> decltype(m::log1p(x)) { return m::log1p(x); }
#endif
template <class T> static inline T sigmoid(T x) { return T(1) / (T(1) + kiln::exp_vec(-x)); }
template <class T> static inline T gelu(T x) { return T(0.5) * x * (T(1) + m::erf(x * T(0.70710678118654752440))); }
// Phi(x), the standard normal CDF, given g = exp(-x^2 / 2) (which gelu's gradient shares with the
// density), with a small *relative* error in both tails (< 1e-6 for |x| < 6): gelu's x Phi(x)
// taken as 0.5 x (1 + erf(x / sqrt 2)) is, for negative x, a small difference of numbers near 1
// (1.5e-4 relative error at x = -3 with a 4e-7 erf), which a later division amplifies (fuzz seed
// 15832). Phi(-|x|) = erfc(a) / 2 = g erfcx(a) / 2 for a = |x| / sqrt 2, erfcx (the scaled erfc,
// smooth and ~ 1 / (a sqrt pi) at large a) as P(a) / Q(a), degrees 4 and 5, a relative-error fit
// made for kiln on [0, 9.5] (5e-9 in exact arithmetic, 3.3e-7 evaluated in float); beyond, g is 0
// and Phi 0 or 1 in float, infinities included. NaN stays NaN through P / Q.
static inline float normal_cdf(float x, float g) {
  const float ax = __builtin_fabsf(x) * 0.70710678118654752440f;
  const float a = ax > 9.5f ? 9.5f : ax;  // one select: a clamp of x made GCC evaluate P / Q twice
  float p = 0x1.083332p-5f;
  p = madd(p, a, 0x1.d01aap-3f);
  p = madd(p, a, 0x1.73c74p-1f);
  p = madd(p, a, 0x1.3bb136p+0f);
  p = madd(p, a, 1.0f);
  float q = 0x1.d44698p-5f;
  q = madd(q, a, 0x1.9b54ccp-2f);
  q = madd(q, a, 0x1.50adaep+0f);
  q = madd(q, a, 0x1.32074cp+1f);
  q = madd(q, a, 0x1.2e475ap+1f);
  q = madd(q, a, 1.0f);
  const float half_erfc = 0.5f * g * (p / q);
  return x < 0 ? half_erfc : 1.0f - half_erfc;
}
static inline float gaussian(float x) { return exp_nonpositive(-0.5f * x * x); }
static inline float gelu(float x) { return x * normal_cdf(x, gaussian(x)); }
template <class T> static inline T gelu_tanh(T x) {
  return T(0.5) * x * (T(1) + kiln::tanh(T(0.79788456080286535588) * (x + T(0.044715) * x * x * x)));
}
// Derivatives of gelu and its tanh form, as ATen's gelu_backward computes them: Phi(x) + x phi(x),
// and d/dx of 0.5 x (1 + tanh(beta (x + kappa x^3))).
template <class T> static inline T gelu_grad(T x) {
  const T cdf = T(0.5) * (T(1) + m::erf(x * T(0.70710678118654752440)));
  return cdf + x * T(0.39894228040143267794) * kiln::exp_vec(T(-0.5) * x * x);
}
// In float, Phi through normal_cdf, accurate where it is small, sharing the density's exp.
static inline float gelu_grad(float x) {
  const float g = gaussian(x);
  return normal_cdf(x, g) + x * 0.39894228040143267794f * g;
}
template <class T> static inline T gelu_tanh_grad(T x) {
  const T beta = T(0.79788456080286535588), kappa = T(0.044715);
  const T t = kiln::tanh(beta * (x + kappa * x * x * x));
  return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * beta * (T(1) + T(3) * kappa * x * x);
}
// An integer converts to +0.0, never -0.0; written as a select because GCC, with
// -fno-trapping-math, folds float -> integer -> float into trunc(), which keeps -0.5's sign.
template <class F, class I> static inline F int_to_float(I v) { F f = static_cast<F>(v); return f == F(0) ? F(0) : f; }
// A float converts to an integer as eager's x86 code converts it: NaN and values outside int64's
// (for the narrower types int32's) range give the "integer indefinite" INT64_MIN (INT32_MIN), and
// int16 / int8 / uint8 take int32's low bits. The C++ conversion is undefined there, and GCC, with
// -fno-trapping-math, folded float -> integer -> float into trunc(), which kept NaN, inf and 1e20
// where eager has -2147483648 (`x.int() + 0.5`). (Elsewhere, ARM's conversions saturate, in eager too.)
template <class I, class F> static inline I float_to_int(F x) {
#if defined(__x86_64__) || defined(__i386__)
  if constexpr (sizeof(I) == 8) {
    return x >= F(-9223372036854775808.0) && x < F(9223372036854775808.0) ? static_cast<I>(x) : static_cast<I>(INT64_MIN);
  } else {
    const int32_t v = x >= F(-2147483648.0) && x < F(2147483648.0) ? static_cast<int32_t>(x) : INT32_MIN;
    return static_cast<I>(v);
  }
#else
  return static_cast<I>(x);
#endif
}
// NaN-propagating max/min: `a > b ? a : b` already yields b when b is NaN (one vmaxps), so only a
// NaN in a needs a test (one compare and a masked move, where testing both cost four and a blend).
template <class T> static inline T maxnan(T a, T b) { return a != a ? a : (a > b ? a : b); }
template <class T> static inline T minnan(T a, T b) { return a != a ? a : (a < b ? a : b); }
template <class T> static inline T fmaxv(T a, T b) { return a != a ? b : (b != b ? a : (a > b ? a : b)); }
template <class T> static inline T fminv(T a, T b) { return a != a ? b : (b != b ? a : (a < b ? a : b)); }
// |x|: the sign bit cleared for floats (abs(-0.) is +0., as eager's; `x < 0 ? -x : x` kept -0.).
template <class T> static inline T abs_value(T x) { return x < T(0) ? T(-x) : x; }
static inline float abs_value(float x) { return __builtin_fabsf(x); }
static inline double abs_value(double x) { return __builtin_fabs(x); }
template <class T> static inline T relu(T x) { return x < T(0) ? T(0) : x; }
// A NaN bound gives NaN, as eager's clamp does (a NaN x stays x).
template <class T> static inline T clamp_lo(T x, T lo) { return x < lo || lo != lo ? lo : x; }
template <class T> static inline T clamp_hi(T x, T hi) { return x > hi || hi != hi ? hi : x; }
template <class T> static inline T sign(T x) { return T((T(0) < x) - (x < T(0))); }
template <class T> static inline T floordiv(T a, T b, int* err) {
  if constexpr (std::is_integral<T>::value) {
    if (b == 0) { fail(err, 2); return 0; }
    T q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
  } else {
    // ATen's floor division of floats: from fmod, so that a result just below an integer in
    // exact arithmetic (1.0 // 0.001 is 999) is not rounded up by the division.
    if (b == 0) return a / b;
    T mod = m::fmod(a, b);
    T div = (a - mod) / b;
    if (mod != 0 && ((b < 0) != (mod < 0))) div -= T(1);
    if (div == 0) return m::copysign(T(0), a / b);
    T fl = m::floor(div);
    return div - fl > T(0.5) ? fl + T(1) : fl;
  }
}
template <class T> static inline T truncdiv(T a, T b, int* err) {
  if constexpr (std::is_integral<T>::value) {
    if (b == 0) { fail(err, 2); return 0; }
    return a / b;
  } else {
    return m::trunc(a / b);
  }
}
template <class T> static inline T remainder(T a, T b, int* err) {
  if constexpr (std::is_integral<T>::value) {
    if (b == 0) { fail(err, 2); return 0; }
    T r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
  } else {
    T r = m::fmod(a, b);
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
  }
}
template <class T> static inline T fmodv(T a, T b, int* err) {
  if constexpr (std::is_integral<T>::value) {
    if (b == 0) { fail(err, 2); return 0; }
    return a % b;
  } else {
    return m::fmod(a, b);
  }
}
template <class T> static inline T powv(T a, T b) {
  if constexpr (std::is_integral<T>::value) {
    if (b < 0) return a == 1 ? 1 : (a == -1 ? (b % 2 ? -1 : 1) : 0);
    T r = 1;
    while (b) { if (b & 1) r *= a; a *= a; b >>= 1; }
    return r;
  } else {
    if (b == T(2)) return a * a;
    if (b == T(0.5)) return kiln::sqrt(a);
    return m::pow(a, b);
  }
}
static inline int64_t checked_index(int64_t i, int64_t bound, int* err) {
  if (i < 0 || i >= bound) { fail(err, 1); return 0; }
  return i;
}
// argmax/argmin: (v, i) replaces the best (bv, bi) when it is better; NaN beats every number,
// ties and NaNs keep the smallest position (eager's rule). bi < 0 marks "nothing seen yet".
template <bool kMax, class T> static inline void arg_update(T& bv, int64_t& bi, T v, int64_t i) {
  bool take;
  if (bi < 0) take = true;
  else if (bv != bv) take = v != v && i < bi;
  else if (v != v) take = true;
  else take = kMax ? (v > bv || (v == bv && i < bi)) : (v < bv || (v == bv && i < bi));
  if (take) { bv = v; bi = i; }
}
template <class T> static inline void welford_add(T& mean, T& m2, T x, T inv_n) {
  T d = x - mean;
  mean += d * inv_n;
  m2 += d * (x - mean);
}
template <class T> static inline void welford_merge(T& n, T& mean, T& m2, T nb, T meanb, T m2b) {
  if (nb == 0) return;
  if (n == 0) {  // taken as it is: d * d * 0 would be NaN once d * d overflows
    n = nb; mean = meanb; m2 = m2b;
    return;
  }
  T nn = n + nb;
  T d = meanb - mean;
  mean += d * (nb / nn);
  m2 += m2b + d * d * (n * nb / nn);
  n = nn;
}
}  // namespace kiln
