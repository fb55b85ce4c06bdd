// Lowering rules for reductions and the normalisations built on them: sum, mean, amax/amin,
// prod, any/all, argmax/argmin, var/std (Welford), softmax and log_softmax and their backward,
// layer norm and its backward, group norm, batch norm in inference. Results are kernel locals;
// their epilogues inline into the same kernel.
#include <cmath>
#include <stdexcept>

#include "lowering/lowerer.h"

namespace kiln::lowering {
using namespace ir;

namespace {

// The reduced dims, wrapped into [0, rank); every dim when the argument is absent or empty.
// Callers have checked rank > 0, so a dim outside the range is a malformed node: it throws, and
// the graph runs eagerly rather than index out of bounds.
std::vector<int64_t> norm_dims(const AtenArg* a, size_t rank) {
  std::vector<int64_t> dims;
  if (!a || a->kind == AtenArg::kNone || (a->kind == AtenArg::kIntList && a->ints.empty())) {
    for (size_t d = 0; d < rank; ++d) dims.push_back(static_cast<int64_t>(d));
    return dims;
  }
  std::vector<int64_t> raw = a->kind == AtenArg::kIntList ? a->ints : std::vector<int64_t>{a->i};
  const int64_t r = static_cast<int64_t>(rank);
  for (int64_t d : raw) {
    const int64_t w = d < 0 ? d + r : d;
    if (w < 0 || w >= r) throw std::invalid_argument("reduction dim out of range");
    dims.push_back(w);
  }
  return dims;
}

DType acc_type(DType in, ReduceOp op) {
  if (op == ReduceOp::kAny || op == ReduceOp::kAll) return DType::kBool;
  if (is_floating(in)) return in == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
  if (op == ReduceOp::kMax || op == ReduceOp::kMin) return in;
  return DType::kInt64;
}

// A per-channel parameter (weight, bias, running statistics) read at the channel (dim 1) of an
// index over the normalised tensor; empty when the argument is None.
Loader channel_loader(Lowerer& L, const AtenArg* a) {
  if (!a || a->kind != AtenArg::kTensor) return Loader();
  const int v = a->value;
  Lowerer* Lp = &L;
  return [Lp, v](const std::vector<Index>& i, LoadCtx& c) { return Lp->value(v).loader({i[1]}, c); };
}

// (x - mean) * rstd [* weight] [+ bias] in `acc`, the affine normalisation every norm ends with.
ExprPtr normalize(ExprPtr x, ExprPtr mean, ExprPtr rstd, const Loader& W, const Loader& B,
                  const std::vector<Index>& i, LoadCtx& c, DType acc) {
  ExprPtr e = binary(BinaryOp::kMul, binary(BinaryOp::kSub, cast(x, acc), cast(mean, acc), acc), rstd, acc);
  if (W) e = binary(BinaryOp::kMul, e, cast(W(i, c), acc), acc);
  if (B) e = binary(BinaryOp::kAdd, e, cast(B(i, c), acc), acc);
  return e;
}

// The sizes `x` is broadcast over for a per-row statistic (mean, rstd: the rows' sizes, then 1
// for each normalised dim): whether `v` has them.
bool row_statistic(Lowerer& L, int v, const std::vector<int64_t>& xs, size_t k) {
  const auto& s = L.meta(v).sizes;
  if (s.size() != xs.size()) return false;
  for (size_t d = 0; d < xs.size(); ++d)
    if (s[d] != (d + k < xs.size() ? xs[d] : 1)) return false;
  return true;
}

// native_layer_norm_backward through its formulas (xhat = (x - mean) * rstd, g = dy * weight):
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat))   (means over the normalised dims)
//   dweight = sum over rows of dy * xhat,  dbias = sum over rows of dy
// The two row sums share a kernel with dx; the column sums are reductions of their own.
bool lower_layer_norm_backward(Lowerer& L, const AtenNode& n) {
  if (n.outputs.size() != 3 || n.args.size() < 8) return false;
  const AtenArg* dy = &n.args[0];  // grad_out
  const AtenArg* in = n.arg("input");
  const AtenArg* ns = n.arg("normalized_shape");
  const AtenArg* mean = n.arg("mean");
  const AtenArg* rstd = n.arg("rstd");
  const AtenArg* w = n.arg("weight");
  if (!dy || !in || !ns || !mean || !rstd || dy->kind != AtenArg::kTensor || in->kind != AtenArg::kTensor ||
      ns->kind != AtenArg::kIntList || mean->kind != AtenArg::kTensor || rstd->kind != AtenArg::kTensor)
    return false;
  const TensorMeta& xm = L.meta(in->value);
  const std::vector<int64_t> xs = xm.sizes;
  const size_t rank = xs.size(), k = ns->ints.size();
  if (!is_floating(xm.dtype) || k == 0 || k > rank || L.meta(dy->value).sizes != xs) return false;
  if (!std::equal(ns->ints.begin(), ns->ints.end(), xs.end() - k)) return false;
  if (k == rank || !row_statistic(L, mean->value, xs, k) || !row_statistic(L, rstd->value, xs, k)) return false;
  const bool has_w = w && w->kind == AtenArg::kTensor;
  if (has_w && L.meta(w->value).sizes != std::vector<int64_t>(xs.end() - k, xs.end())) return false;
  int64_t count = 1;
  std::vector<int64_t> norm_dims, row_dims;
  for (size_t d = 0; d < rank; ++d) {
    if (d + k >= rank) norm_dims.push_back(static_cast<int64_t>(d)), count *= xs[d];
    else row_dims.push_back(static_cast<int64_t>(d));
  }
  const DType acc = xm.dtype == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
  Loader DY = L.broadcast(dy->value, xs), X = L.broadcast(in->value, xs);
  Loader Mean = L.broadcast(mean->value, xs), Rstd = L.broadcast(rstd->value, xs);
  Loader W = has_w ? L.broadcast(w->value, xs) : Loader();
  auto xhat = [=](const std::vector<Index>& i, LoadCtx& c) {
    return binary(BinaryOp::kMul, binary(BinaryOp::kSub, cast(X(i, c), acc), cast(Mean(i, c), acc), acc), cast(Rstd(i, c), acc), acc);
  };
  auto g = [=](const std::vector<Index>& i, LoadCtx& c) {
    ExprPtr e = cast(DY(i, c), acc);
    return W ? binary(BinaryOp::kMul, e, cast(W(i, c), acc), acc) : e;
  };
  const int dx = n.outputs[0], dw = n.outputs[1], db = n.outputs[2];
  if (dx >= 0) {
    // The row sums are held under dx's id while they are built (as softmax's are); dx is
    // defined last.
    L.reduction(ReduceOp::kSum, g, xs, norm_dims, acc, {{dx, 0, nullptr}});
    Loader S1 = L.value(dx).loader;
    L.reduction(ReduceOp::kSum, [=](const std::vector<Index>& i, LoadCtx& c) { return binary(BinaryOp::kMul, g(i, c), xhat(i, c), acc); },
                xs, norm_dims, acc, {{dx, 0, nullptr}});
    Loader S2 = L.value(dx).loader;
    const DType od = L.meta(dx).dtype;
    const ExprPtr inv_count = constant(1.0 / static_cast<double>(count), acc);
    L.define(dx, [=](const std::vector<Index>& i, LoadCtx& c) {
      std::vector<Index> ri = i;
      for (int64_t d : norm_dims) ri[d] = Index::of(0);
      ExprPtr m1 = binary(BinaryOp::kMul, S1(ri, c), inv_count, acc);
      ExprPtr m2 = binary(BinaryOp::kMul, S2(ri, c), inv_count, acc);
      ExprPtr e = binary(BinaryOp::kSub, binary(BinaryOp::kSub, g(i, c), m1, acc), binary(BinaryOp::kMul, xhat(i, c), m2, acc), acc);
      return cast(binary(BinaryOp::kMul, cast(Rstd(i, c), acc), e, acc), od);
    }, 12);
  }
  if (dw >= 0) {
    if (L.meta(dw).sizes != std::vector<int64_t>(xs.end() - k, xs.end())) return false;
    L.reduction(ReduceOp::kSum, [=](const std::vector<Index>& i, LoadCtx& c) { return binary(BinaryOp::kMul, cast(DY(i, c), acc), xhat(i, c), acc); },
                xs, row_dims, acc, {{dw, 0, nullptr}});
  }
  if (db >= 0) {
    if (L.meta(db).sizes != std::vector<int64_t>(xs.end() - k, xs.end())) return false;
    L.reduction(ReduceOp::kSum, [=](const std::vector<Index>& i, LoadCtx& c) { return cast(DY(i, c), acc); }, xs, row_dims, acc, {{db, 0, nullptr}});
  }
  return true;
}

// _softmax_backward_data(dy, y, dim): y * (dy - sum(dy * y)) for softmax, dy - exp(y) * sum(dy)
// for log_softmax (y is the forward's output), the sum over `dim` in the same kernel.
bool lower_softmax_backward(Lowerer& L, const AtenNode& n) {
  if (n.outputs.size() != 1 || n.outputs[0] < 0 || n.args.size() < 4) return false;
  const AtenArg* dy = &n.args[0];  // grad_output
  const AtenArg* y = n.arg("output");
  const AtenArg* dim = n.arg("dim");
  const AtenArg* in_dtype = n.arg("input_dtype");
  if (!dy || !y || !dim || !in_dtype || dy->kind != AtenArg::kTensor || y->kind != AtenArg::kTensor || dim->kind != AtenArg::kInt) return false;
  const TensorMeta& ym = L.meta(y->value);
  const std::vector<int64_t> ys = ym.sizes;
  const int64_t rank = static_cast<int64_t>(ys.size());
  if (!is_floating(ym.dtype) || rank == 0 || L.meta(dy->value).sizes != ys) return false;
  const int64_t d = dim->i < 0 ? dim->i + rank : dim->i;
  if (d < 0 || d >= rank) return false;
  // The graph's operator is the one softmax's formula takes after the tracer: "log" names
  // _log_softmax's backward.
  const bool log = n.op.find("_log_softmax_backward") != std::string::npos;
  const DType acc = ym.dtype == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
  Loader DY = L.broadcast(dy->value, ys), Y = L.broadcast(y->value, ys);
  const int out = n.outputs[0];
  L.reduction(ReduceOp::kSum, [=](const std::vector<Index>& i, LoadCtx& c) {
    ExprPtr g = cast(DY(i, c), acc);
    return log ? g : binary(BinaryOp::kMul, g, cast(Y(i, c), acc), acc);
  }, ys, {d}, acc, {{out, 0, nullptr}});
  Loader S = L.value(out).loader;
  const DType od = L.meta(out).dtype;
  L.define(out, [=](const std::vector<Index>& i, LoadCtx& c) {
    std::vector<Index> ri = i;
    ri[d] = Index::of(0);
    ExprPtr g = cast(DY(i, c), acc), yv = cast(Y(i, c), acc), s = S(ri, c);
    ExprPtr r = log ? binary(BinaryOp::kSub, g, binary(BinaryOp::kMul, unary(UnaryOp::kExp, yv, acc), s, acc), acc)
                    : binary(BinaryOp::kMul, yv, binary(BinaryOp::kSub, g, s, acc), acc);
    return cast(r, od);
  }, 8);
  return true;
}

}  // namespace

bool is_inference_batch_norm(const AtenNode& n) {
  return n.op == "aten::_native_batch_norm_legit_no_training" ||
         ((n.op == "aten::native_batch_norm" || n.op == "aten::cudnn_batch_norm") && n.arg("training") && n.arg("training")->i == 0);
}

bool lower_reduction(Lowerer& L, const AtenNode& n) {
  if (n.args.empty() || n.args[0].kind != AtenArg::kTensor) return false;
  const int x = n.args[0].value;
  const TensorMeta& xm = L.meta(x);
  const auto& xs = xm.sizes;
  const size_t rank = xs.size();
  // Empty and 0-dim reductions go to ATen: it knows the identities, errors and the 0-dim
  // convention that dim 0 and -1 name the scalar itself.
  if (rank == 0) return false;
  for (int64_t s : xs)
    if (s == 0) return false;
  Loader X = L.broadcast(x, xs);

  // (reduction, whether the sum is divided by the count: mean)
  static const std::map<std::string, std::pair<ReduceOp, bool>> kSimple = {
      {"aten::sum.dim_IntList", {ReduceOp::kSum, false}}, {"aten::sum", {ReduceOp::kSum, false}},
      {"aten::mean.dim", {ReduceOp::kSum, true}}, {"aten::mean", {ReduceOp::kSum, true}},
      {"aten::amax", {ReduceOp::kMax, false}}, {"aten::amin", {ReduceOp::kMin, false}},
      {"aten::prod.dim_int", {ReduceOp::kProd, false}}, {"aten::prod", {ReduceOp::kProd, false}},
      {"aten::any.dim", {ReduceOp::kAny, false}}, {"aten::any.dims", {ReduceOp::kAny, false}}, {"aten::any", {ReduceOp::kAny, false}},
      {"aten::all.dim", {ReduceOp::kAll, false}}, {"aten::all.dims", {ReduceOp::kAll, false}}, {"aten::all", {ReduceOp::kAll, false}}};
  if (auto it = kSimple.find(n.op); it != kSimple.end() && n.outputs.size() == 1) {
    const auto [red, mean] = it->second;
    const int out = n.outputs[0];
    const DType od = L.meta(out).dtype;
    auto dims = norm_dims(n.args.size() > 1 && n.args[1].kind != AtenArg::kBool && n.args[1].kind != AtenArg::kDType ? &n.args[1] : nullptr, rank);
    int64_t count = 1;
    for (int64_t d : dims) count *= xs[d];
    DType acc = acc_type(is_floating(od) ? od : xm.dtype, red);
    if (mean) acc = od == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
    Lowerer::ReductionOut o{out, 0, nullptr};
    if (mean) o.finish = [count, acc](ExprPtr e, LoadCtx&) { return binary(BinaryOp::kDiv, e, constant(static_cast<double>(count), acc), acc); };
    L.reduction(red, [X, acc](const std::vector<Index>& i, LoadCtx& c) { return cast(X(i, c), acc); }, xs, dims, acc, {o});
    return true;
  }
  if ((n.op == "aten::argmax" || n.op == "aten::argmin") && n.outputs.size() == 1 && xm.dtype != DType::kBool) {
    const AtenArg* d = n.arg("dim");
    auto dims = norm_dims(d && d->kind == AtenArg::kInt ? d : nullptr, rank);
    DType acc = is_floating(xm.dtype) ? (xm.dtype == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32) : xm.dtype;
    L.reduction(n.op == "aten::argmax" ? ReduceOp::kArgMax : ReduceOp::kArgMin, [X, acc](const std::vector<Index>& i, LoadCtx& c) { return cast(X(i, c), acc); },
                xs, dims, acc, {{n.outputs[0], 1, nullptr}});
    return true;
  }
  if (n.op == "aten::native_group_norm" && is_floating(xm.dtype) && n.outputs.size() == 3 && rank >= 2 && n.args.size() >= 8) {
    const int64_t N = xs[0], C = xs[1], G = n.args[6].i;
    const double eps = n.args[7].d;
    if (G <= 0 || C % G != 0 || n.outputs[0] < 0 || n.outputs[1] < 0 || n.outputs[2] < 0) return false;
    const int64_t K = xm.numel() / (N * G), CG = C / G;
    DType acc = xm.dtype == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
    // Statistics over each (sample, group): the input read as [N, G, C/G * spatial].
    const std::vector<int64_t> grouped = {N, G, K};
    Loader Xg = [X, grouped, xs, acc](const std::vector<Index>& i, LoadCtx& c) { return cast(X(reshape_index(i, grouped, xs, c.ranges), c), acc); };
    auto rstd_of = [=](ExprPtr m2, LoadCtx&) {
      return unary(UnaryOp::kRsqrt, binary(BinaryOp::kAdd, binary(BinaryOp::kDiv, m2, constant(static_cast<double>(K), acc), acc), constant(eps, acc), acc), acc);
    };
    const int out = n.outputs[0], mean = n.outputs[1], rstd = n.outputs[2];
    L.reduction(ReduceOp::kWelford, Xg, grouped, {2}, acc, {{mean, 0, nullptr}, {rstd, 1, rstd_of}});
    Loader Mean = L.value(mean).loader, Rstd = L.value(rstd).loader;
    Loader W = channel_loader(L, &n.args[1]), B = channel_loader(L, &n.args[2]);
    DType od = L.meta(out).dtype;
    L.define(out, [=](const std::vector<Index>& i, LoadCtx& c) {
      std::vector<Index> gi = {i[0], floordiv(i[1], CG, c.ranges)};
      return cast(normalize(X(i, c), Mean(gi, c), Rstd(gi, c), W, B, i, c, acc), od);
    }, 10);
    return true;
  }
  if ((n.op == "aten::var.correction" || n.op == "aten::std.correction" || n.op == "aten::var_mean.correction") && is_floating(xm.dtype)) {
    auto dims = norm_dims(n.arg("dim"), rank);
    int64_t count = 1;
    for (int64_t d : dims) count *= xs[d];
    double corr = 1;
    if (const AtenArg* c = n.arg("correction"); c && c->kind != AtenArg::kNone) corr = c->kind == AtenArg::kDouble ? c->d : static_cast<double>(c->i);
    // ATen's CPU var/std accumulate in double whatever the input's floating type (squares of large
    // float32 values overflow where eager's stay finite); on CUDA in float.
    DType acc = xm.dtype == DType::kFloat64 || !L.cuda() ? DType::kFloat64 : DType::kFloat32;
    double denom = std::max(0.0, static_cast<double>(count) - corr);
    bool is_std = n.op == "aten::std.correction";
    std::vector<Lowerer::ReductionOut> outs;
    outs.push_back({n.outputs[0], 1, [=](ExprPtr m2, LoadCtx&) {
      ExprPtr v = binary(BinaryOp::kDiv, m2, constant(denom, acc), acc);
      return is_std ? unary(UnaryOp::kSqrt, v, acc) : v;
    }});
    if (n.outputs.size() == 2) outs.push_back({n.outputs[1], 0, nullptr});
    L.reduction(ReduceOp::kWelford, [X, acc](const std::vector<Index>& i, LoadCtx& c) { return cast(X(i, c), acc); }, xs, dims, acc, outs);
    return true;
  }
  if ((n.op == "aten::_softmax" || n.op == "aten::_log_softmax") && is_floating(xm.dtype) && rank > 0) {
    int64_t dim = n.args[1].i < 0 ? n.args[1].i + static_cast<int64_t>(rank) : n.args[1].i;
    const int out = n.outputs[0];
    DType acc = xm.dtype == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
    DType od = L.meta(out).dtype;
    // Two reductions over `dim` in one kernel: the maximum, then the sum of exp(x - max);
    // their results are defined as hidden values the epilogue reads.
    // The output's id holds the max, then the sum, while they are built; it is redefined last.
    int vmax = out;
    L.reduction(ReduceOp::kMax, [X, acc](const std::vector<Index>& i, LoadCtx& c) { return cast(X(i, c), acc); }, xs, {dim}, acc,
                {{vmax, 0, nullptr}});
    Loader M = L.value(vmax).loader;
    auto shifted = [X, M, acc](const std::vector<Index>& i, LoadCtx& c) {
      std::vector<Index> mi = i;
      return binary(BinaryOp::kSub, cast(X(i, c), acc), M(mi, c), acc);
    };
    auto dim_zero = [dim](std::vector<Index> i) { i[dim] = Index::of(0); return i; };
    bool log = n.op == "aten::_log_softmax";
    // softmax in the accumulation type: the sum stage keeps each exp(x - max) in the output,
    // which the epilogue then scales in place by 1 / sum (one exp per element, not two). On a GPU
    // the exp is cheap and memory is not: the epilogue recomputes it from x (re-read from L2).
    const int keep = !log && od == acc && !L.cuda() ? L.new_buffer(Buffer::kKernelOutput, L.meta(out)) : -1;
    // The exp of ATen's vectorized softmax kernels (kiln::exp_vec rounds like it), not torch.exp's.
    L.reduction(ReduceOp::kSum, [shifted, acc](const std::vector<Index>& i, LoadCtx& c) { return unary(UnaryOp::kExpVec, shifted(i, c), acc); }, xs, {dim}, acc,
                {{out, 0, nullptr}}, keep);
    Loader Ssum = L.value(out).loader;
    if (keep >= 0) {
      Lowerer* Lp = &L;
      const Buffer b = L.program().buffers[keep];
      L.store_region(keep, b.sizes, b.strides, 0, [=](const std::vector<Index>& i, LoadCtx& c) {
        return binary(BinaryOp::kMul, Lp->load_written(keep, i, c), unary(UnaryOp::kReciprocal, Ssum(dim_zero(i), c), acc), acc);
      }, true);
      L.value(out).realize = [keep] { return keep; };
      L.ensure_buffer(out);
      return true;
    }
    L.define(out, [=](const std::vector<Index>& i, LoadCtx& c) {
      ExprPtr s = Ssum(dim_zero(i), c);
      std::vector<Index> mi = i;
      mi[dim] = Index::of(0);
      ExprPtr sh = binary(BinaryOp::kSub, cast(X(i, c), acc), M(mi, c), acc);
      // exp(x - max) * (1 / sum): the reciprocal is loop-invariant, so it is computed once per row.
      ExprPtr r = log ? binary(BinaryOp::kSub, sh, unary(UnaryOp::kLog, s, acc), acc) : binary(BinaryOp::kMul, unary(UnaryOp::kExpVec, sh, acc), unary(UnaryOp::kReciprocal, s, acc), acc);
      return cast(r, od);
    }, 8);
    return true;
  }
  if (n.op == "aten::native_layer_norm" && is_floating(xm.dtype) && n.outputs.size() == 3) {
    const AtenArg* ns = n.arg("normalized_shape");
    if (!ns || ns->kind != AtenArg::kIntList) return false;
    const size_t k = ns->ints.size();
    std::vector<int64_t> dims;
    int64_t count = 1;
    for (size_t d = rank - k; d < rank; ++d) dims.push_back(static_cast<int64_t>(d)), count *= xs[d];
    const AtenArg* w = n.arg("weight");
    const AtenArg* b = n.arg("bias");
    double eps = n.arg("eps") ? n.arg("eps")->d : 1e-5;
    DType acc = xm.dtype == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
    const int out = n.outputs[0], mean = n.outputs[1], rstd = n.outputs[2];
    if (mean < 0 || rstd < 0 || out < 0) return false;
    auto rstd_of = [=](ExprPtr m2, LoadCtx&) {
      return unary(UnaryOp::kRsqrt, binary(BinaryOp::kAdd, binary(BinaryOp::kDiv, m2, constant(static_cast<double>(count), acc), acc), constant(eps, acc), acc), acc);
    };
    L.reduction(ReduceOp::kWelford, [X, acc](const std::vector<Index>& i, LoadCtx& c) { return cast(X(i, c), acc); }, xs, dims, acc,
                {{mean, 0, nullptr}, {rstd, 1, rstd_of}});
    Loader Mean = L.value(mean).loader, Rstd = L.value(rstd).loader;
    std::vector<int64_t> tail(xs.end() - k, xs.end());
    Loader W = w && w->kind == AtenArg::kTensor ? L.broadcast(w->value, xs) : Loader();
    Loader B = b && b->kind == AtenArg::kTensor ? L.broadcast(b->value, xs) : Loader();
    DType od = L.meta(out).dtype;
    L.define(out, [=](const std::vector<Index>& i, LoadCtx& c) {
      std::vector<Index> ri = i;
      for (size_t d = rank - k; d < rank; ++d) ri[d] = Index::of(0);
      return cast(normalize(X(i, c), Mean(ri, c), Rstd(ri, c), W, B, i, c, acc), od);
    }, 10);
    return true;
  }
  if (n.op == "aten::native_layer_norm_backward") return lower_layer_norm_backward(L, n);
  if (n.op == "aten::_softmax_backward_data" || n.op == "aten::_log_softmax_backward_data") return lower_softmax_backward(L, n);
  if (is_inference_batch_norm(n) && is_floating(xm.dtype) && rank >= 2) {
    const AtenArg* w = n.arg("weight");
    const AtenArg* b = n.arg("bias");
    const AtenArg* rm = n.arg("running_mean");
    const AtenArg* rv = n.arg("running_var");
    if (!rm || !rv || rm->kind != AtenArg::kTensor || rv->kind != AtenArg::kTensor) return false;
    const AtenArg* e = n.arg("eps") ? n.arg("eps") : n.arg("epsilon");
    double eps = e ? e->d : 1e-5;
    DType acc = xm.dtype == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
    Loader W = channel_loader(L, w), B = channel_loader(L, b), RM = channel_loader(L, rm), RV = channel_loader(L, rv);
    DType od = L.meta(n.outputs[0]).dtype;
    L.define(n.outputs[0], [=](const std::vector<Index>& i, LoadCtx& c) {
      ExprPtr inv = unary(UnaryOp::kRsqrt, binary(BinaryOp::kAdd, cast(RV(i, c), acc), constant(eps, acc), acc), acc);
      return cast(normalize(X(i, c), RM(i, c), inv, W, B, i, c, acc), od);
    }, 10);
    // The saved statistics are empty in inference; they are only ever allocated.
    for (size_t o = 1; o < n.outputs.size(); ++o) {
      if (n.outputs[o] < 0) continue;
      if (L.meta(n.outputs[o]).numel() != 0) return false;
      L.define(n.outputs[o], [acc](const std::vector<Index>&, LoadCtx&) { return constant(0, acc); }, 1);
    }
    return true;
  }
  return false;
}

}  // namespace kiln::lowering
