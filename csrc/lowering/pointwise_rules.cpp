// Lowering rules for elementwise operators: unary and binary math, comparisons, where and
// masked_fill, clamps and activations, casts and copies, and constant generators (full,
// arange, tril/triu). Each defines its output as a lazy value.
#include <cmath>
#include <limits>
#include <map>

#include "lowering/lowerer.h"

namespace kiln::lowering {
using namespace ir;

namespace {

const std::map<std::string, UnaryOp> kUnary = {
    {"aten::abs", UnaryOp::kAbs}, {"aten::neg", UnaryOp::kNeg}, {"aten::exp", UnaryOp::kExp}, {"aten::exp2", UnaryOp::kExp2},
    {"aten::expm1", UnaryOp::kExpm1}, {"aten::log", UnaryOp::kLog}, {"aten::log2", UnaryOp::kLog2}, {"aten::log10", UnaryOp::kLog10},
    {"aten::log1p", UnaryOp::kLog1p}, {"aten::sqrt", UnaryOp::kSqrt}, {"aten::rsqrt", UnaryOp::kRsqrt}, {"aten::sin", UnaryOp::kSin},
    {"aten::cos", UnaryOp::kCos}, {"aten::tan", UnaryOp::kTan}, {"aten::tanh", UnaryOp::kTanh}, {"aten::sigmoid", UnaryOp::kSigmoid},
    {"aten::relu", UnaryOp::kRelu}, {"aten::erf", UnaryOp::kErf}, {"aten::reciprocal", UnaryOp::kReciprocal}, {"aten::floor", UnaryOp::kFloor},
    {"aten::ceil", UnaryOp::kCeil}, {"aten::trunc", UnaryOp::kTrunc}, {"aten::round", UnaryOp::kRound}, {"aten::sign", UnaryOp::kSign},
    {"aten::logical_not", UnaryOp::kNot}, {"aten::bitwise_not", UnaryOp::kBitNot}, {"aten::isnan", UnaryOp::kIsNan},
    {"aten::silu", UnaryOp::kSilu}, {"aten::asin", UnaryOp::kAsin}, {"aten::acos", UnaryOp::kAcos}, {"aten::atan", UnaryOp::kAtan},
    {"aten::sinh", UnaryOp::kSinh}, {"aten::cosh", UnaryOp::kCosh}, {"aten::erfc", UnaryOp::kErfc}, {"aten::hardswish", UnaryOp::kHardSwish},
    {"aten::hardsigmoid", UnaryOp::kHardSigmoid}, {"aten::mish", UnaryOp::kMish}, {"aten::positive", UnaryOp::kIdentity},
    {"aten::isinf", UnaryOp::kIsInf}, {"aten::sgn", UnaryOp::kSign}, {"aten::square", UnaryOp::kSquare},
};

const std::map<std::string, BinaryOp> kBinary = {
    {"aten::mul", BinaryOp::kMul}, {"aten::maximum", BinaryOp::kMax}, {"aten::minimum", BinaryOp::kMin}, {"aten::pow", BinaryOp::kPow},
    {"aten::eq", BinaryOp::kEq}, {"aten::ne", BinaryOp::kNe}, {"aten::lt", BinaryOp::kLt}, {"aten::le", BinaryOp::kLe}, {"aten::gt", BinaryOp::kGt},
    {"aten::ge", BinaryOp::kGe}, {"aten::logical_and", BinaryOp::kAnd}, {"aten::logical_or", BinaryOp::kOr}, {"aten::logical_xor", BinaryOp::kXor},
    {"aten::bitwise_and", BinaryOp::kBitAnd}, {"aten::bitwise_or", BinaryOp::kBitOr}, {"aten::bitwise_xor", BinaryOp::kBitXor},
    {"aten::remainder", BinaryOp::kRemainder}, {"aten::fmod", BinaryOp::kFMod}, {"aten::atan2", BinaryOp::kAtan2},
    {"aten::floor_divide", BinaryOp::kFloorDiv}, {"aten::fmax", BinaryOp::kFMax}, {"aten::fmin", BinaryOp::kFMin},
};

template <class Op>
bool is_predicate(Op op) { return info(op).is(kOpPredicate); }

// Base name without overload: "aten::add.Tensor" -> "aten::add".
std::string base_name(const std::string& op) { return op.substr(0, op.find('.')); }
std::string overload(const std::string& op) {
  auto p = op.find('.');
  return p == std::string::npos ? "" : op.substr(p + 1);
}

DType arg_dtype(Lowerer& L, const AtenArg& a) {
  if (a.kind == AtenArg::kTensor) return L.meta(a.value).dtype;
  if (a.kind == AtenArg::kDouble) return DType::kFloat64;
  if (a.kind == AtenArg::kBool) return DType::kBool;
  return DType::kInt64;
}

bool is_scalar_or_tensor(const AtenArg& a) {
  return a.kind == AtenArg::kTensor || a.kind == AtenArg::kInt || a.kind == AtenArg::kDouble || a.kind == AtenArg::kBool;
}

// The type a value of `out` dtype is computed in: bf16 and fp16 math runs in f32 (fp16 is lowered
// for CUDA only).
DType compute_type(DType out) { return out == DType::kBFloat16 || out == DType::kFloat16 ? DType::kFloat32 : out; }

// Comparison operand type: tensors decide; Python scalars only lift integers to floats.
DType compare_type(Lowerer& L, const AtenArg& a, const AtenArg& b) {
  DType ta = arg_dtype(L, a), tb = arg_dtype(L, b);
  bool sa = a.kind != AtenArg::kTensor || L.meta(a.value).sizes.empty();
  bool sb = b.kind != AtenArg::kTensor || L.meta(b.value).sizes.empty();
  if (sa && !sb) std::swap(ta, tb), std::swap(sa, sb);
  DType t = ta;
  if (sb && !sa) {
    if (is_floating(tb) && !is_floating(ta)) t = DType::kFloat32;
    else if (tb == DType::kInt64 && ta == DType::kBool) t = DType::kInt64;
  } else {
    t = promote(ta, tb);
  }
  return compute_type(t);
}

using Fn = std::function<ExprPtr(const std::vector<ExprPtr>&)>;

// Defines the node's first output as fn(args...) over the output shape.
void define_map(Lowerer& L, const AtenNode& n, std::vector<Loader> args, Fn fn, int extra_cost = 1, bool transcendental = false) {
  int out = n.outputs[0];
  int cost = extra_cost;
  for (const AtenArg& a : n.args)
    if (a.kind == AtenArg::kTensor) {
      cost += L.value(a.value).cost;
      transcendental |= L.value(a.value).transcendental;
    }
  L.define(out, [args, fn](const std::vector<Index>& idx, LoadCtx& ctx) {
    std::vector<ExprPtr> v;
    for (const auto& a : args) v.push_back(a(idx, ctx));
    return fn(v);
  }, cost);
  L.value(out).transcendental = transcendental;
}

// Unary operators that cost tens of instructions per element (the op table's flag).
bool is_transcendental(UnaryOp op) { return info(op).is(kOpTranscendental); }

double scalar_of(const AtenArg* a, double dflt) {
  if (!a || a->kind == AtenArg::kNone) return dflt;
  return a->kind == AtenArg::kDouble ? a->d : static_cast<double>(a->i);
}

}  // namespace

bool lower_pointwise(Lowerer& L, const AtenNode& n) {
  if (n.outputs.size() != 1 || n.outputs[0] < 0) return false;
  const TensorMeta& om = L.meta(n.outputs[0]);
  const auto& S = om.sizes;
  const DType out = om.dtype, ct = compute_type(out);
  const std::string base = base_name(n.op), ov = overload(n.op);
  auto A = [&](int i) -> const AtenArg& { return n.args.at(i); };
  auto tensor_arg = [&](int i) { return i < static_cast<int>(n.args.size()) && n.args[i].kind == AtenArg::kTensor; };

  if (auto it = kUnary.find(base); it != kUnary.end() && (ov.empty() || ov == "default") && tensor_arg(0)) {
    UnaryOp op = it->second;
    DType t = is_predicate(op) || op == UnaryOp::kBitNot || op == UnaryOp::kNot ? compute_type(L.meta(A(0).value).dtype) : ct;
    define_map(L, n, {L.arg_loader(A(0), S, t)}, [op, t, out](const std::vector<ExprPtr>& v) { return cast(unary(op, v[0], is_predicate(op) ? DType::kBool : t), out); },
               1, is_transcendental(op));
    return true;
  }
  // pow with a small constant exponent: products and roots, as ATen computes it (std::pow is
  // slow and does not vectorize).
  if (n.op == "aten::pow.Tensor_Scalar" && tensor_arg(0) && is_floating(ct) && n.args.size() == 2 &&
      (A(1).kind == AtenArg::kDouble || A(1).kind == AtenArg::kInt)) {
    const double e = A(1).kind == AtenArg::kDouble ? A(1).d : static_cast<double>(A(1).i);
    if (e == 1 || e == 2 || e == 3 || e == 0.5 || e == -0.5 || e == -1 || e == -2) {
      define_map(L, n, {L.arg_loader(A(0), S, ct)}, [e, ct, out](const std::vector<ExprPtr>& v) {
        const ExprPtr& x = v[0];
        ExprPtr r = e == 1 ? x : e == 2 ? binary(BinaryOp::kMul, x, x, ct) : e == 3 ? binary(BinaryOp::kMul, binary(BinaryOp::kMul, x, x, ct), x, ct)
                  : e == 0.5 ? unary(UnaryOp::kSqrt, x, ct) : e == -0.5 ? unary(UnaryOp::kRsqrt, x, ct) : e == -1 ? unary(UnaryOp::kReciprocal, x, ct)
                  : unary(UnaryOp::kReciprocal, binary(BinaryOp::kMul, x, x, ct), ct);
        return cast(r, out);
      });
      return true;
    }
  }
  if (auto it = kBinary.find(base); it != kBinary.end() && n.args.size() >= 2 && is_scalar_or_tensor(A(0)) && is_scalar_or_tensor(A(1)) &&
                                     (tensor_arg(0) || tensor_arg(1))) {
    BinaryOp op = it->second;
    bool pred = is_predicate(op);
    DType t = pred ? compare_type(L, A(0), A(1)) : ct;
    if (op == BinaryOp::kBitAnd || op == BinaryOp::kBitOr || op == BinaryOp::kBitXor) t = out;
    define_map(L, n, {L.arg_loader(A(0), S, t), L.arg_loader(A(1), S, t)},
               [op, t, pred, out](const std::vector<ExprPtr>& v) { return cast(binary(op, v[0], v[1], pred ? DType::kBool : t), out); });
    return true;
  }
  if ((base == "aten::add" || base == "aten::sub" || base == "aten::rsub") && n.args.size() >= 2 && is_scalar_or_tensor(A(0)) && is_scalar_or_tensor(A(1))) {
    double alpha = scalar_of(n.arg("alpha"), 1.0);
    bool rsub = base == "aten::rsub";
    BinaryOp op = base == "aten::add" ? BinaryOp::kAdd : BinaryOp::kSub;
    define_map(L, n, {L.arg_loader(A(0), S, ct), L.arg_loader(A(1), S, ct)}, [=](const std::vector<ExprPtr>& v) {
      ExprPtr a = rsub ? v[1] : v[0], b = rsub ? v[0] : v[1];
      if (alpha != 1.0) b = binary(BinaryOp::kMul, b, constant(alpha, ct), ct);
      return cast(binary(op, a, b, ct), out);
    });
    return true;
  }
  if (base == "aten::div" && n.args.size() >= 2 && is_scalar_or_tensor(A(0)) && is_scalar_or_tensor(A(1))) {
    const AtenArg* mode = n.arg("rounding_mode");
    BinaryOp op = BinaryOp::kDiv;
    if (mode && mode->kind == AtenArg::kString) op = mode->s == "floor" ? BinaryOp::kFloorDiv : BinaryOp::kTruncDiv;
    DType t = op == BinaryOp::kDiv ? ct : compute_type(promote(arg_dtype(L, A(0)), arg_dtype(L, A(1))));
    if (op != BinaryOp::kDiv && is_floating(out)) t = ct;
    define_map(L, n, {L.arg_loader(A(0), S, t), L.arg_loader(A(1), S, t)},
               [op, t, out](const std::vector<ExprPtr>& v) { return cast(binary(op, v[0], v[1], t), out); });
    return true;
  }
  if (n.op == "aten::gelu" && tensor_arg(0)) {
    const AtenArg* ap = n.arg("approximate");
    UnaryOp op = ap && ap->s == "tanh" ? UnaryOp::kGeluTanh : UnaryOp::kGelu;
    define_map(L, n, {L.arg_loader(A(0), S, ct)}, [op, ct, out](const std::vector<ExprPtr>& v) { return cast(unary(op, v[0], ct), out); }, 8);
    return true;
  }
  // gelu's backward, dy * gelu'(x): generated, so the min-cut partitioner's recomputed gelu and
  // this gradient fuse into one pass over x.
  if (n.op == "aten::gelu_backward" && tensor_arg(0) && tensor_arg(1)) {
    const AtenArg* ap = n.arg("approximate");
    UnaryOp op = ap && ap->s == "tanh" ? UnaryOp::kGeluTanhGrad : UnaryOp::kGeluGrad;
    define_map(L, n, {L.arg_loader(A(0), S, ct), L.arg_loader(A(1), S, ct)}, [op, ct, out](const std::vector<ExprPtr>& v) {
      return cast(binary(BinaryOp::kMul, v[0], unary(op, v[1], ct), ct), out);
    }, 12);
    return true;
  }
  if ((n.op == "aten::clamp" || n.op == "aten::clamp_min" || n.op == "aten::clamp_max" || n.op == "aten::hardtanh") && tensor_arg(0)) {
    const AtenArg* lo = n.op == "aten::clamp_max" ? nullptr : n.arg(n.op == "aten::hardtanh" ? "min_val" : "min");
    const AtenArg* hi = n.op == "aten::clamp_min" ? nullptr : n.arg(n.op == "aten::hardtanh" ? "max_val" : "max");
    bool has_lo = lo && lo->kind != AtenArg::kNone, has_hi = hi && hi->kind != AtenArg::kNone;
    double vlo = scalar_of(lo, 0), vhi = scalar_of(hi, 0);
    define_map(L, n, {L.arg_loader(A(0), S, ct)}, [=](const std::vector<ExprPtr>& v) {
      ExprPtr e = v[0];
      if (has_lo) e = binary(BinaryOp::kClampLo, e, constant(vlo, ct), ct);
      if (has_hi) e = binary(BinaryOp::kClampHi, e, constant(vhi, ct), ct);
      return cast(e, out);
    });
    return true;
  }
  if (n.op == "aten::leaky_relu" && tensor_arg(0)) {
    double slope = scalar_of(n.arg("negative_slope"), 0.01);
    define_map(L, n, {L.arg_loader(A(0), S, ct)}, [=](const std::vector<ExprPtr>& v) {
      return cast(where(binary(BinaryOp::kGt, v[0], constant(0, ct), DType::kBool), v[0], binary(BinaryOp::kMul, v[0], constant(slope, ct), ct), ct), out);
    });
    return true;
  }
  if (n.op == "aten::elu" && tensor_arg(0)) {
    double alpha = scalar_of(n.arg("alpha"), 1), scale = scalar_of(n.arg("scale"), 1), in_scale = scalar_of(n.arg("input_scale"), 1);
    define_map(L, n, {L.arg_loader(A(0), S, ct)}, [=](const std::vector<ExprPtr>& v) {
      ExprPtr neg = binary(BinaryOp::kMul, unary(UnaryOp::kExpm1, binary(BinaryOp::kMul, v[0], constant(in_scale, ct), ct), ct), constant(alpha, ct), ct);
      ExprPtr e = where(binary(BinaryOp::kGt, v[0], constant(0, ct), DType::kBool), v[0], neg, ct);
      return cast(binary(BinaryOp::kMul, e, constant(scale, ct), ct), out);
    });
    return true;
  }
  if (n.op == "aten::softplus" && tensor_arg(0)) {
    double beta = scalar_of(n.arg("beta"), 1), thr = scalar_of(n.arg("threshold"), 20);
    define_map(L, n, {L.arg_loader(A(0), S, ct)}, [=](const std::vector<ExprPtr>& v) {
      ExprPtr bx = binary(BinaryOp::kMul, v[0], constant(beta, ct), ct);
      ExprPtr soft = binary(BinaryOp::kDiv, unary(UnaryOp::kLog1p, unary(UnaryOp::kExp, bx, ct), ct), constant(beta, ct), ct);
      return cast(where(binary(BinaryOp::kGt, bx, constant(thr, ct), DType::kBool), v[0], soft, ct), out);
    });
    return true;
  }
  if ((n.op == "aten::where.self" || n.op == "aten::where.ScalarSelf" || n.op == "aten::where.ScalarOther" || n.op == "aten::where.Scalar") &&
      tensor_arg(0)) {
    define_map(L, n, {L.arg_loader(A(0), S, DType::kBool), L.arg_loader(A(1), S, ct), L.arg_loader(A(2), S, ct)},
               [ct, out](const std::vector<ExprPtr>& v) { return cast(where(v[0], v[1], v[2], ct), out); });
    return true;
  }
  if ((n.op == "aten::masked_fill.Scalar" || n.op == "aten::masked_fill.Tensor") && tensor_arg(0) && tensor_arg(1)) {
    define_map(L, n, {L.arg_loader(A(1), S, DType::kBool), L.arg_loader(A(2), S, ct), L.arg_loader(A(0), S, ct)},
               [ct, out](const std::vector<ExprPtr>& v) { return cast(where(v[0], v[1], v[2], ct), out); });
    return true;
  }
  if ((n.op == "aten::addcmul" || n.op == "aten::addcdiv") && tensor_arg(0) && tensor_arg(1) && tensor_arg(2)) {
    double value = scalar_of(n.arg("value"), 1);
    BinaryOp op = n.op == "aten::addcmul" ? BinaryOp::kMul : BinaryOp::kDiv;
    define_map(L, n, {L.arg_loader(A(0), S, ct), L.arg_loader(A(1), S, ct), L.arg_loader(A(2), S, ct)}, [=](const std::vector<ExprPtr>& v) {
      return cast(binary(BinaryOp::kAdd, v[0], binary(BinaryOp::kMul, constant(value, ct), binary(op, v[1], v[2], ct), ct), ct), out);
    });
    return true;
  }
  if (n.op == "aten::lerp.Scalar" && tensor_arg(0) && tensor_arg(1)) {
    double w = scalar_of(n.arg("weight"), 0);
    define_map(L, n, {L.arg_loader(A(0), S, ct), L.arg_loader(A(1), S, ct)}, [=](const std::vector<ExprPtr>& v) {
      return cast(binary(BinaryOp::kAdd, v[0], binary(BinaryOp::kMul, constant(w, ct), binary(BinaryOp::kSub, v[1], v[0], ct), ct), ct), out);
    });
    return true;
  }
  // Casts and copies. _to_copy only when it stays on the CPU (no device argument change).
  if ((n.op == "aten::_to_copy" || n.op == "aten::clone" || n.op == "aten::lift_fresh_copy") && tensor_arg(0)) {
    const AtenArg* dev = n.arg("device");
    if (dev && dev->kind == AtenArg::kOther && dev->s != "cpu") return false;
    const AtenArg* layout = n.arg("layout");
    if (layout && layout->kind == AtenArg::kInt && layout->i != 0) return false;
    DType in = L.meta(A(0).value).dtype;
    Loader l = L.broadcast(A(0).value, S);
    // A 16-bit float result is rounded here: its temporaries hold floats.
    const bool round_bf16 = out == DType::kBFloat16 && in != DType::kBFloat16;
    const bool round_f16 = out == DType::kFloat16 && in != DType::kFloat16;
    L.define(n.outputs[0], [l, out, round_bf16, round_f16](const std::vector<Index>& idx, LoadCtx& ctx) {
      ExprPtr e = cast(l(idx, ctx), out);
      if (round_f16) return unary(UnaryOp::kRoundF16, e, DType::kFloat16);
      return round_bf16 ? unary(UnaryOp::kRoundBf16, e, DType::kBFloat16) : e;
    }, L.value(A(0).value).cost + 1);
    // RoPE's cos and sin reach the heads' multiplications through a cast to the model's dtype.
    L.value(n.outputs[0]).transcendental = L.value(A(0).value).transcendental;
    return true;
  }
  if (n.op == "aten::copy" && tensor_arg(0) && tensor_arg(1)) {
    define_map(L, n, {L.arg_loader(A(1), S, out)}, [](const std::vector<ExprPtr>& v) { return v[0]; });
    return true;
  }
  if (n.op == "aten::fill.Scalar" && tensor_arg(0)) {
    double v = scalar_of(&A(1), 0);
    L.define(n.outputs[0], [v, out](const std::vector<Index>&, LoadCtx&) { return constant(v, out); }, 1);
    return true;
  }
  if (n.op == "aten::full" || n.op == "aten::zeros" || n.op == "aten::ones" || n.op == "aten::scalar_tensor" ||
      n.op == "aten::full_like" || n.op == "aten::zeros_like" || n.op == "aten::ones_like") {
    double v = n.op == "aten::ones" || n.op == "aten::ones_like" ? 1.0 : 0.0;
    if (n.op == "aten::full" || n.op == "aten::full_like") v = scalar_of(n.arg("fill_value"), 0);
    if (n.op == "aten::scalar_tensor") v = scalar_of(n.arg("s"), 0);
    L.define(n.outputs[0], [v, out](const std::vector<Index>&, LoadCtx&) { return constant(v, out); }, 1);
    return true;
  }
  if (base == "aten::arange" && S.size() == 1) {
    double start = 0, step = 1;
    if (ov == "start" || ov == "start_step") start = scalar_of(n.arg("start"), 0);
    if (ov == "start_step") step = scalar_of(n.arg("step"), 1);
    // Integer positions (arange(t) feeding an embedding) are index arithmetic: no float math per
    // element, and a reader can vectorize them.
    if (!is_floating(out) && start == std::floor(start) && step == std::floor(step) && std::fabs(start) < 1e15 && std::fabs(step) < 1e15) {
      const int64_t a = static_cast<int64_t>(start), d = static_cast<int64_t>(step);
      L.define(n.outputs[0], [a, d, out](const std::vector<Index>& idx, LoadCtx&) {
        return index_value(add(mul(idx[0], d), Index::of(a)), out);
      }, 1);
      return true;
    }
    L.define(n.outputs[0], [start, step, out](const std::vector<Index>& idx, LoadCtx&) {
      ExprPtr i = index_value(idx[0], DType::kFloat64);
      return cast(binary(BinaryOp::kAdd, constant(start, DType::kFloat64), binary(BinaryOp::kMul, i, constant(step, DType::kFloat64), DType::kFloat64), DType::kFloat64), out);
    }, 3);
    return true;
  }
  if ((n.op == "aten::tril" || n.op == "aten::triu") && tensor_arg(0) && S.size() >= 2) {
    int64_t diag = static_cast<int64_t>(scalar_of(n.arg("diagonal"), 0));
    bool lower = n.op == "aten::tril";
    Loader l = L.broadcast(A(0).value, S);
    const size_t r = S.size() - 2, c = S.size() - 1;
    L.define(n.outputs[0], [=](const std::vector<Index>& idx, LoadCtx& ctx) {
      // keep where (col - row) <= diag (tril) / >= diag (triu)
      ExprPtr d = index_value(add(idx[c], mul(idx[r], -1)), DType::kInt64);
      ExprPtr keep = binary(lower ? BinaryOp::kLe : BinaryOp::kGe, d, constant(static_cast<double>(diag), DType::kInt64), DType::kBool);
      return where(keep, l(idx, ctx), constant(0, out), out);
    }, L.value(A(0).value).cost + 3);
    L.value(n.outputs[0]).transcendental = L.value(A(0).value).transcendental;
    return true;
  }
  return false;
}

}  // namespace kiln::lowering
