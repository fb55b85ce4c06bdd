// Lowering rule for max pooling: max_pool2d_with_indices whose indices nothing reads (inference).
// Each output element is the largest of its window's elements, read through the input's loader,
// so the operators that produce the input (a ResNet stem's batch norm and ReLU) fuse into the
// pooling loop instead of writing their result for an extern call to read back. ResNet-18 (fp32,
// batch 32, channels-last, H200): the stem's batch norm + ReLU kernel (52 us) and ATen's NHWC max
// pooling kernel, which also writes int64 indices (123 us), became one kernel of 44 us.
//
// Window positions in the padding: the loop IR has no masked load, and a generated kernel loads
// every element its expression names. So each window offset's input position is moved into the
// input where it falls outside (an affine index plus floor-division indicators of the output
// position, below), loaded there, and replaced by -inf through a where. Eager's semantics
// follow: padding never wins, a NaN in the window gives NaN.
#include <algorithm>
#include <limits>

#include "lowering/lowerer.h"

namespace kiln::lowering {
using namespace ir;

namespace {

// One window offset along one spatial dimension: input position h(o) = stride*o + shift of
// output position o in [0, out); in the input exactly for o in [lo, hi).
struct Offset {
  int64_t shift = 0, stride = 1, out = 0, lo = 0, hi = 0;
  int64_t below = 0;  // added to h where o < lo
  int64_t above = 0;  // subtracted from h where o >= hi
  bool valid() const { return lo < hi; }
};

int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

// The offset `k` of a window (kernel, stride, padding, dilation) over an input of `in` positions
// and an output of `out`; nullopt-like (out = -1) when the moved positions would not all land in
// the input.
Offset window_offset(int64_t k, int64_t in, int64_t out, int64_t stride, int64_t pad, int64_t dilation) {
  Offset f;
  f.shift = dilation * k - pad;
  f.stride = stride;
  f.out = out;
  f.lo = std::min<int64_t>(std::max<int64_t>(ceil_div(-f.shift, stride), 0), out);
  f.hi = std::min<int64_t>(std::max<int64_t>(ceil_div(in - f.shift, stride), 0), out);
  if (!f.valid()) return f;
  if (f.lo > 0) f.below = -f.shift;  // h + below = stride*o >= 0
  if (f.hi < out) f.above = stride * (out - 1) + f.shift - (in - 1);  // the last output lands on in - 1
  for (int64_t o = 0; o < out; ++o) {
    int64_t h = stride * o + f.shift + (o < f.lo ? f.below : 0) - (o >= f.hi ? f.above : 0);
    if (h < 0 || h >= in) {
      f.out = -1;
      return f;
    }
  }
  return f;
}

// [o < lo] and [o >= hi] as floor divisions over o in [0, out): floordiv(o + out - t, out) is 0
// below t and 1 from t on.
Index at_or_above(const Index& o, int64_t t, int64_t out, const VarRanges& r) {
  return floordiv(add(o, Index::of(out - t)), out, r);
}

// The input position of offset f for output position o (always inside the input).
Index position(const Offset& f, const Index& o, const VarRanges& r) {
  Index h = add(mul(o, f.stride), Index::of(f.shift));
  if (f.below) h = add(h, mul(add(Index::of(1), mul(at_or_above(o, f.lo, f.out, r), -1)), f.below));
  if (f.above) h = add(h, mul(at_or_above(o, f.hi, f.out, r), -f.above));
  return h;
}

// Whether output position o puts offset f inside the input (nullptr: always).
ExprPtr inside(const Offset& f, const Index& o) {
  ExprPtr c;
  auto both = [&](ExprPtr e) { c = c ? binary(BinaryOp::kAnd, c, e, DType::kBool) : e; };
  if (f.lo > 0) both(binary(BinaryOp::kGe, index_value(o, DType::kInt64), constant(static_cast<double>(f.lo), DType::kInt64), DType::kBool));
  if (f.hi < f.out) both(binary(BinaryOp::kLt, index_value(o, DType::kInt64), constant(static_cast<double>(f.hi), DType::kInt64), DType::kBool));
  return c;
}

// A pooling parameter per spatial dimension: one value serves both; `fallback` when absent.
bool pair_arg(const AtenNode& n, const char* name, std::vector<int64_t> fallback, std::vector<int64_t>* out) {
  const AtenArg* a = n.arg(name);
  std::vector<int64_t> v = a && a->kind == AtenArg::kIntList ? a->ints : std::vector<int64_t>{};
  if (a && a->kind == AtenArg::kInt) v.assign(1, a->i);
  if (v.empty()) v = fallback;
  if (v.size() == 1) v.push_back(v[0]);
  if (v.size() != 2) return false;
  *out = v;
  return true;
}

// Windows larger than this stay ATen's: the expression names every element of the window.
constexpr int64_t kMaxWindow = 25;
// An input whose inlined expression costs more than this per window element is realized first. On
// the CPU only plain loads are inlined: the stem's batch norm + ReLU computed again for each of the
// 9 window elements cost more than writing it once (ResNet-18's stem, batch 1, one thread: 12.6 ms
// fused vs 0.5 + 6.6 ms realized; ATen's NCHW pooling alone took 8.8 ms).
constexpr int kMaxInlinedInputCost = 16;
constexpr int kMaxInlinedInputCostCpu = 1;

}  // namespace

bool lower_pooling(Lowerer& L, const AtenNode& n) {
  if (n.op != "aten::max_pool2d_with_indices" && n.op != "aten::max_pool2d") return false;
  if (n.args.empty() || n.args[0].kind != AtenArg::kTensor || n.outputs.empty() || n.outputs[0] < 0) return false;
  for (size_t o = 1; o < n.outputs.size(); ++o)
    if (n.outputs[o] >= 0 && L.uses(n.outputs[o]) > 0) return false;  // indices read (a training graph's backward)
  const int x = n.args[0].value, out = n.outputs[0];
  const TensorMeta& xm = L.meta(x);
  const std::vector<int64_t> ys = L.meta(out).sizes;
  const size_t rank = xm.sizes.size();
  if ((rank != 3 && rank != 4) || ys.size() != rank || !is_floating(xm.dtype)) return false;
  std::vector<int64_t> kernel, stride, pad, dilation;
  if (!pair_arg(n, "kernel_size", {}, &kernel) || !pair_arg(n, "padding", {0}, &pad) || !pair_arg(n, "dilation", {1}, &dilation)) return false;
  if (!pair_arg(n, "stride", kernel, &stride)) return false;
  for (int d = 0; d < 2; ++d)
    if (kernel[d] < 1 || stride[d] < 1 || dilation[d] < 1 || pad[d] < 0) return false;
  if (kernel[0] * kernel[1] > kMaxWindow) return false;
  // Per spatial dimension, its window offsets that ever land in the input.
  std::vector<Offset> offs[2];
  for (int d = 0; d < 2; ++d) {
    const size_t dim = rank - 2 + d;
    for (int64_t k = 0; k < kernel[d]; ++k) {
      Offset f = window_offset(k, xm.sizes[dim], ys[dim], stride[d], pad[d], dilation[d]);
      if (f.out < 0) return false;
      if (f.valid()) offs[d].push_back(f);
    }
    if (offs[d].empty()) return false;
  }
  if (L.value(x).cost > (L.cuda() ? kMaxInlinedInputCost : kMaxInlinedInputCostCpu)) L.ensure_buffer(x);
  const DType acc = xm.dtype == DType::kBFloat16 || xm.dtype == DType::kFloat16 ? DType::kFloat32 : xm.dtype;
  const DType od = L.meta(out).dtype;
  Lowerer* Lp = &L;
  const int window = static_cast<int>(offs[0].size() * offs[1].size());
  L.define(out, [=](const std::vector<Index>& i, LoadCtx& c) {
    ExprPtr best;
    for (const Offset& fh : offs[0])
      for (const Offset& fw : offs[1]) {
        std::vector<Index> at = i;
        at[rank - 2] = position(fh, i[rank - 2], c.ranges);
        at[rank - 1] = position(fw, i[rank - 1], c.ranges);
        ExprPtr v = cast(Lp->value(x).loader(at, c), acc);
        ExprPtr in_h = inside(fh, i[rank - 2]), in_w = inside(fw, i[rank - 1]);
        ExprPtr in = in_h && in_w ? binary(BinaryOp::kAnd, in_h, in_w, DType::kBool) : in_h ? in_h : in_w;
        if (in) v = where(in, v, constant(-std::numeric_limits<double>::infinity(), acc), acc);
        best = best ? binary(BinaryOp::kMax, best, v, acc) : v;
      }
    return cast(best, od);
  }, window * (L.value(x).cost + 4));
  // The indices (read by nothing): only ever allocated.
  for (size_t o = 1; o < n.outputs.size(); ++o)
    if (n.outputs[o] >= 0) L.define(n.outputs[o], [](const std::vector<Index>&, LoadCtx&) { return constant(0, DType::kInt64); }, 1);
  return true;
}

}  // namespace kiln::lowering
