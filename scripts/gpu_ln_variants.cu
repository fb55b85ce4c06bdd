// Hand-written variants of pointwise_ln's row kernel (out = layer_norm(gelu(x * w + b) + x) * w + b,
// rows of D = 4096 floats), to find what the generated kernel should do. Compiled by NVRTC with
// kiln's prefix header in front (kiln::Vec, load_vec, gelu, Welford helpers).
#define D 4096
namespace v {
template <int BLOCK> __device__ __forceinline__ float block_sum(float s, float* smem) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) smem[threadIdx.x >> 5] = s;
  __syncthreads();
  float t = smem[0];
#pragma unroll
  for (int w = 1; w < BLOCK / 32; ++w) t += smem[w];
  return t;
}
template <int BLOCK> __device__ __forceinline__ kiln::WelfordState<float> block_welford(kiln::WelfordState<float> a, kiln::WelfordState<float>* smem) {
  return kiln::block_allreduce<BLOCK / 32>(a, [](kiln::WelfordState<float> p, kiln::WelfordState<float> q) { return kiln::welford_combine(p, q); }, smem);
}
// Row loads and stores with or without the streaming cache hint (ld.global.cs / st.global.cs:
// evict first, so the four weight vectors every block rereads stay in L1/L2).
template <bool S> __device__ __forceinline__ kiln::Vec<float, 4> ld(const float* p) {
  if (S) { const float4 t = __ldcs(reinterpret_cast<const float4*>(p)); return {{t.x, t.y, t.z, t.w}}; }
  return kiln::load_vec<4>(p);
}
template <bool S> __device__ __forceinline__ void st(float* p, const kiln::Vec<float, 4>& o) {
  if (S) __stcs(reinterpret_cast<float4*>(p), make_float4(o.v[0], o.v[1], o.v[2], o.v[3]));
  else kiln::store_vec<4>(p, o);
}
// Mean and M2 of a block's row in one reduction round: each thread's (mean, m2) over its own C
// values, combined by Chan's formula with counts known at compile time (equal counts in the warp's
// butterfly; warp k joining k warps before it in the block), so no division and one round of
// shuffles and shared memory instead of two.
template <int BLOCK, int C> __device__ __forceinline__ void block_moments(float& mean, float& m2, float2* smem) {
  float c = C;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const float mb = __shfl_xor_sync(0xffffffffu, mean, o), qb = __shfl_xor_sync(0xffffffffu, m2, o);
    const float d = mb - mean;
    mean = 0.5f * (mean + mb);
    m2 = m2 + qb + d * d * (0.5f * c);
    c *= 2.f;
  }
  __syncthreads();
  if ((threadIdx.x & 31) == 0) smem[threadIdx.x >> 5] = make_float2(mean, m2);
  __syncthreads();
  float2 a = smem[0];
#pragma unroll
  for (int w = 1; w < BLOCK / 32; ++w) {  // w warps of 32 * C values so far, one more
    const float2 b = smem[w];
    const float d = b.x - a.x;
    a.x += d * (1.f / (w + 1));
    a.y += b.y + d * d * (32.f * C * w / (w + 1));
  }
  mean = a.x;
  m2 = a.y;
}
}  // namespace v

// One row per block. RED 0: a Welford fold per vector group and a Welford block reduction (kiln's
// generated kernel today); 1: one Welford state per thread (its values two-pass in registers),
// Welford block reduction; 2: two block sums (the row's sum, then the squared deviations from its
// mean, over the values held in registers); 3: one round (v::block_moments). ST bit 1: x loaded with the streaming hint; bit 2: out
// stored with it.
template <int BLOCK, int RED, int ST = 0>
__device__ __forceinline__ void ln_row(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b, const float* __restrict__ lw, const float* __restrict__ lb, float* __restrict__ out) {
  constexpr int G = D / 4 / BLOCK;
  const int row = blockIdx.x, lane = threadIdx.x;
  kiln::Vec<float, 4> xc[G];
#pragma unroll
  for (int j = 0; j < G; ++j) xc[j] = v::ld<(ST & 1) != 0>(x + row * D + (lane + j * BLOCK) * 4);
  float vc[G][4];
  float mean, m2;
  kiln::WelfordState<float> acc = {0.f, 0.f, 0.f};
  float sum = 0.f;
#pragma unroll
  for (int j = 0; j < G; ++j) {
    const kiln::Vec<float, 4> wv = kiln::load_vec<4>(w + (lane + j * BLOCK) * 4), bv = kiln::load_vec<4>(b + (lane + j * BLOCK) * 4);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      vc[j][k] = kiln::gelu(xc[j].v[k] * wv.v[k] + bv.v[k]) + xc[j].v[k];
      sum += vc[j][k];
    }
    if (RED == 0) kiln::welford_group(acc, vc[j]);
  }
  if (RED == 3) {
    __shared__ float2 msm[BLOCK / 32];
    mean = sum * (1.f / (4 * G));
    m2 = 0.f;
#pragma unroll
    for (int j = 0; j < G; ++j)
#pragma unroll
      for (int k = 0; k < 4; ++k) m2 += (vc[j][k] - mean) * (vc[j][k] - mean);
    v::block_moments<BLOCK, 4 * G>(mean, m2, msm);
  } else if (RED == 2) {
    __shared__ float smem[BLOCK / 32];
    mean = v::block_sum<BLOCK>(sum, smem) * (1.f / D);
    float s2 = 0.f;
#pragma unroll
    for (int j = 0; j < G; ++j)
#pragma unroll
      for (int k = 0; k < 4; ++k) s2 += (vc[j][k] - mean) * (vc[j][k] - mean);
    m2 = v::block_sum<BLOCK>(s2, smem);
  } else {
    if (RED == 1) {
      const float tm = sum * (1.f / (4 * G));
      float s2 = 0.f;
#pragma unroll
      for (int j = 0; j < G; ++j)
#pragma unroll
        for (int k = 0; k < 4; ++k) s2 += (vc[j][k] - tm) * (vc[j][k] - tm);
      acc = {float(4 * G), tm, s2};
    }
    __shared__ kiln::WelfordState<float> wsm[32];
    acc = v::block_welford<BLOCK>(acc, wsm);
    mean = acc.mean;
    m2 = acc.m2;
  }
  const float rstd = 1.f / sqrtf(m2 / D + 1e-5f);
#pragma unroll
  for (int j = 0; j < G; ++j) {
    const kiln::Vec<float, 4> wv = kiln::load_vec<4>(lw + (lane + j * BLOCK) * 4), bv = kiln::load_vec<4>(lb + (lane + j * BLOCK) * 4);
    kiln::Vec<float, 4> o;
#pragma unroll
    for (int k = 0; k < 4; ++k) o.v[k] = (vc[j][k] - mean) * rstd * wv.v[k] + bv.v[k];
    v::st<(ST & 2) != 0>(out + row * D + (lane + j * BLOCK) * 4, o);
  }
}
#define ROW(B, R) \
  extern "C" __global__ void __launch_bounds__(B) ln_b##B##_r##R(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b, const float* __restrict__ lw, const float* __restrict__ lb, float* __restrict__ out) { \
    ln_row<B, R>(x, w, b, lw, lb, out); \
  }
ROW(128, 0) ROW(256, 0) ROW(512, 0)
ROW(128, 1) ROW(256, 1) ROW(512, 1)
ROW(128, 2) ROW(256, 2) ROW(512, 2) ROW(1024, 2)
ROW(128, 3) ROW(256, 3) ROW(512, 3)
#define ROWS(B, R, S) \
  extern "C" __global__ void __launch_bounds__(B) ln_b##B##_r##R##_s##S(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b, const float* __restrict__ lw, const float* __restrict__ lb, float* __restrict__ out) { \
    ln_row<B, R, S>(x, w, b, lw, lb, out); \
  }
ROWS(256, 2, 1) ROWS(256, 2, 2) ROWS(256, 2, 3) ROWS(512, 2, 3)
ROWS(256, 1, 1) ROWS(256, 1, 2) ROWS(256, 1, 3) ROWS(512, 1, 3)

// Persistent: gridDim.x blocks walk the rows; the next row's loads are issued into the registers
// the current row's x leaves free as soon as its values are computed, so they overlap the row's
// two reductions and its stores. WB 1: w and b held in registers for all rows.
template <int BLOCK, int WB>
__device__ __forceinline__ void ln_persistent(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b, const float* __restrict__ lw, const float* __restrict__ lb, float* __restrict__ out, int rows) {
  constexpr int G = D / 4 / BLOCK;
  const int lane = threadIdx.x;
  __shared__ float smem[BLOCK / 32];
  kiln::Vec<float, 4> wr[WB ? G : 1], br[WB ? G : 1], lwr[WB ? G : 1], lbr[WB ? G : 1];
  if (WB) {
#pragma unroll
    for (int j = 0; j < G; ++j) {
      const int c = (lane + j * BLOCK) * 4;
      wr[j] = kiln::load_vec<4>(w + c), br[j] = kiln::load_vec<4>(b + c), lwr[j] = kiln::load_vec<4>(lw + c), lbr[j] = kiln::load_vec<4>(lb + c);
    }
  }
  kiln::Vec<float, 4> xc[G];
  int row = blockIdx.x;
  if (row < rows) {
#pragma unroll
    for (int j = 0; j < G; ++j) xc[j] = kiln::load_vec<4>(x + row * D + (lane + j * BLOCK) * 4);
  }
  for (; row < rows; row += gridDim.x) {
    float vc[G][4];
    float sum = 0.f;
#pragma unroll
    for (int j = 0; j < G; ++j) {
      kiln::Vec<float, 4> wv, bv;
      if (WB) wv = wr[j], bv = br[j];
      else wv = kiln::load_vec<4>(w + (lane + j * BLOCK) * 4), bv = kiln::load_vec<4>(b + (lane + j * BLOCK) * 4);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        vc[j][k] = kiln::gelu(xc[j].v[k] * wv.v[k] + bv.v[k]) + xc[j].v[k];
        sum += vc[j][k];
      }
    }
    const int next = row + gridDim.x;
    if (next < rows) {
#pragma unroll
      for (int j = 0; j < G; ++j) xc[j] = kiln::load_vec<4>(x + next * D + (lane + j * BLOCK) * 4);
    }
    const float mean = v::block_sum<BLOCK>(sum, smem) * (1.f / D);
    float s2 = 0.f;
#pragma unroll
    for (int j = 0; j < G; ++j)
#pragma unroll
      for (int k = 0; k < 4; ++k) s2 += (vc[j][k] - mean) * (vc[j][k] - mean);
    const float m2 = v::block_sum<BLOCK>(s2, smem);
    const float rstd = 1.f / sqrtf(m2 / D + 1e-5f);
#pragma unroll
    for (int j = 0; j < G; ++j) {
      kiln::Vec<float, 4> wv, bv;
      if (WB) wv = lwr[j], bv = lbr[j];
      else wv = kiln::load_vec<4>(lw + (lane + j * BLOCK) * 4), bv = kiln::load_vec<4>(lb + (lane + j * BLOCK) * 4);
      kiln::Vec<float, 4> o;
#pragma unroll
      for (int k = 0; k < 4; ++k) o.v[k] = (vc[j][k] - mean) * rstd * wv.v[k] + bv.v[k];
      kiln::store_vec<4>(out + row * D + (lane + j * BLOCK) * 4, o);
    }
  }
}
#define PERS(B, W) \
  extern "C" __global__ void __launch_bounds__(B) lnp_b##B##_w##W(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b, const float* __restrict__ lw, const float* __restrict__ lb, float* __restrict__ out, int rows) { \
    ln_persistent<B, W>(x, w, b, lw, lb, out, rows); \
  }
PERS(256, 0) PERS(512, 0) PERS(1024, 0)
PERS(256, 1) PERS(512, 1) PERS(1024, 1)
