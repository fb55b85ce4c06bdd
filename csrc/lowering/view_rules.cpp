// Lowering rules for views and data movement: view/reshape, permute/transpose, expand, slice,
// select, squeeze/unsqueeze, split, cat/stack. A view's loader re-indexes its base; when an extern call
// or the graph's outputs need the view itself, the ATen view op runs on the realized base so
// aliasing matches eager.
#include <algorithm>

#include "lowering/lowerer.h"

namespace kiln::lowering {
using namespace ir;

namespace {

int64_t wrap(int64_t d, int64_t n) { return d < 0 ? d + n : d; }

// `x` is the result of a matrix product (a tensor ATen makes fresh) that the graph does not
// return itself.
bool unsafe_view_of_fresh_product(const AtenGraph& g, int x) {
  const AtenValue& v = g.values.at(x);
  if (v.kind != AtenValue::kNodeOutput) return false;
  if (std::find(g.outputs.begin(), g.outputs.end(), x) != g.outputs.end()) return false;
  const std::string& op = g.nodes.at(v.index).op;
  return op == "aten::mm" || op == "aten::bmm" || op == "aten::addmm" || op == "aten::baddbmm";
}

}  // namespace

bool lower_view(Lowerer& L, const AtenNode& n) {
  if (n.args.empty() || n.args[0].kind != AtenArg::kTensor) {
    return false;
  }
  const int x = n.args[0].value;
  const auto xs = L.meta(x).sizes;
  const int64_t rank = static_cast<int64_t>(xs.size());
  Lowerer* Lp = &L;
  const int node = L.current_node();
  // Realizing a view: run the ATen view op itself on the realized base.
  auto as_view = [Lp, node, x](int out, Loader loader, int cost) {
    Lp->define(out, std::move(loader), cost);
    Lp->value(out).transcendental = Lp->value(x).transcendental;
    Lp->value(out).realize = [Lp, node, out, x]() {
      Lp->ensure_buffer(x);
      Lp->extern_call(node);
      return Lp->value(out).buffer;
    };
  };
  auto base = [Lp, x](const std::vector<Index>& i, LoadCtx& c) { return Lp->value(x).loader(i, c); };
  const int cost = L.value(x).cost;
  const std::string& op = n.op;

  if (op == "aten::view" || op == "aten::_unsafe_view" || op == "aten::reshape" || op == "aten::alias" ||
      op == "aten::view.dtype" || op == "aten::squeeze.dim" || op == "aten::squeeze.dims" || op == "aten::squeeze" ||
      op == "aten::unsqueeze" || op == "aten::flatten.using_ints" || op == "aten::unflatten.int") {
    if (op == "aten::view.dtype") return false;
    const int out = n.outputs[0];
    auto ys = L.meta(out).sizes;
    as_view(out, [=](const std::vector<Index>& i, LoadCtx& c) { return base(reshape_index(i, ys, xs, c.ranges), c); }, cost);
    // _unsafe_view is not a view in ATen's sense: eager's result shares memory with its base, but
    // nothing tracks that. Of a matrix product's fresh result (matmul's decomposition) the ATen
    // call itself is exact and copies nothing (a model's logits: megabytes per call); of anything
    // else (an input, another output) it is realized as a copy, so no aliasing appears.
    if (op == "aten::_unsafe_view" && !unsafe_view_of_fresh_product(L.graph(), x)) L.value(out).realize = nullptr;
    return true;
  }
  if (op == "aten::permute" || op == "aten::t" || op == "aten::transpose.int" || op == "aten::numpy_T") {
    if (rank == 0) return false;  // dims 0 and -1 of a scalar: ATen's identity view
    std::vector<int64_t> perm(rank);
    for (int64_t d = 0; d < rank; ++d) perm[d] = d;
    if (op == "aten::permute") {
      for (int64_t d = 0; d < rank; ++d) perm[d] = wrap(n.args[1].ints[d], rank);
    } else if (op == "aten::t" || op == "aten::numpy_T") {
      std::reverse(perm.begin(), perm.end());
    } else {
      std::swap(perm[wrap(n.args[1].i, rank)], perm[wrap(n.args[2].i, rank)]);
    }
    as_view(n.outputs[0], [=](const std::vector<Index>& i, LoadCtx& c) {
      std::vector<Index> j(rank);
      for (int64_t d = 0; d < rank; ++d) j[perm[d]] = i[d];
      return base(j, c);
    }, cost);
    return true;
  }
  if (op == "aten::expand") {
    auto ys = L.meta(n.outputs[0]).sizes;
    const size_t off = ys.size() - xs.size();
    as_view(n.outputs[0], [=](const std::vector<Index>& i, LoadCtx& c) {
      std::vector<Index> j(xs.size());
      for (size_t d = 0; d < xs.size(); ++d) j[d] = xs[d] == 1 ? Index::of(0) : i[d + off];
      return base(j, c);
    }, cost);
    return true;
  }
  if (op == "aten::slice.Tensor") {
    int64_t dim = wrap(n.args[1].i, rank);
    int64_t start = n.args[2].kind == AtenArg::kNone ? 0 : n.args[2].i;
    int64_t step = n.args.size() > 4 && n.args[4].kind == AtenArg::kInt ? n.args[4].i : 1;
    if (start < 0) start += xs[dim];
    start = std::clamp<int64_t>(start, 0, xs[dim]);
    as_view(n.outputs[0], [=](const std::vector<Index>& i, LoadCtx& c) {
      std::vector<Index> j = i;
      j[dim] = add(mul(i[dim], step), Index::of(start));
      return base(j, c);
    }, cost);
    return true;
  }
  if (op == "aten::select.int") {
    int64_t dim = wrap(n.args[1].i, rank);
    int64_t index = wrap(n.args[2].i, xs[dim]);
    as_view(n.outputs[0], [=](const std::vector<Index>& i, LoadCtx& c) {
      std::vector<Index> j(i.begin(), i.end());
      j.insert(j.begin() + dim, Index::of(index));
      return base(j, c);
    }, cost);
    return true;
  }
  if ((op == "aten::split.Tensor" || op == "aten::split_with_sizes" || op == "aten::unbind.int") && n.list_output) {
    int64_t dim = wrap(n.args.size() > 2 ? n.args[2].i : (op == "aten::unbind.int" ? n.args[1].i : 0), rank);
    if (op == "aten::unbind.int") dim = wrap(n.args[1].i, rank);
    int64_t offset = 0;
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      int out = n.outputs[k];
      int64_t start = offset;
      if (op == "aten::unbind.int") {
        as_view(out, [=](const std::vector<Index>& i, LoadCtx& c) {
          std::vector<Index> j(i.begin(), i.end());
          j.insert(j.begin() + dim, Index::of(start));
          return base(j, c);
        }, cost);
        offset += 1;
      } else {
        as_view(out, [=](const std::vector<Index>& i, LoadCtx& c) {
          std::vector<Index> j = i;
          j[dim] = add(i[dim], Index::of(start));
          return base(j, c);
        }, cost);
        offset += L.meta(out).sizes[dim];
      }
    }
    // All pieces come from one ATen call: realizing any realizes all.
    for (int out : n.outputs) {
      L.value(out).realize = [Lp, node, out, x]() {
        Lp->ensure_buffer(x);
        Lp->extern_call(node);
        return Lp->value(out).buffer;
      };
    }
    return true;
  }
  return false;
}

// cat and stack: each input is stored into its slice of the output buffer.
bool lower_cat(Lowerer& L, const AtenNode& n) {
  if ((n.op != "aten::cat" && n.op != "aten::stack") || n.args.empty() || n.args[0].kind != AtenArg::kTensorList) return false;
  const int out = n.outputs[0];
  const TensorMeta& om = L.meta(out);
  const int64_t rank = static_cast<int64_t>(om.sizes.size());
  int64_t dim = n.args.size() > 1 ? n.args[1].i : 0;
  if (dim < 0) dim += rank;
  for (int v : n.args[0].values)
    if (v < 0) return false;
  Lowerer* Lp = &L;
  const bool stack = n.op == "aten::stack";
  struct Piece { int value; int64_t offset, size; };
  std::vector<Piece> pieces;
  int64_t offset = 0;
  int cost = 0;
  for (int v : n.args[0].values) {
    auto vs = L.meta(v).sizes;
    if (!stack && vs.size() == 1 && vs[0] == 0 && om.sizes.size() != 1) continue;  // legacy empty inputs
    const int64_t size = stack ? 1 : vs[dim];
    if (size > 0) pieces.push_back({v, offset, size});
    offset += size;
    cost += L.value(v).cost + 2;
  }
  auto piece_loader = [Lp, stack, dim](const Piece& p) {
    return [Lp, v = p.value, stack, dim](const std::vector<Index>& i, LoadCtx& c) {
      if (!stack) return Lp->value(v).loader(i, c);
      std::vector<Index> j = i;
      j.erase(j.begin() + dim);
      return Lp->value(v).loader(j, c);
    };
  };
  // Realized: each piece stored into its region of one buffer.
  auto regions = [Lp, out, pieces, piece_loader, dim]() {
    const int buf = Lp->new_buffer(Buffer::kKernelOutput, Lp->meta(out));
    const auto sizes = Lp->program().buffers[buf].sizes;
    const auto strides = Lp->program().buffers[buf].strides;
    for (const Piece& p : pieces) {
      std::vector<int64_t> region = sizes;
      region[dim] = p.size;
      Lp->store_region(buf, region, strides, p.offset * strides[dim], piece_loader(p), true);
    }
    return buf;
  };
  if (pieces.empty() || pieces.size() > 4) {
    L.value(out).realize = regions;
    L.ensure_buffer(out);
    return true;
  }
  // Inlined into its readers (RoPE's rotate_half, a few heads concatenated): each element selects
  // its piece. Every piece is read at an in-bounds index, (i - offset) modulo its size, whatever
  // the element, since a select evaluates both sides.
  const DType dt = om.dtype;
  L.define(out, [pieces, piece_loader, dim, dt](const std::vector<Index>& i, LoadCtx& c) {
    auto at = [&](const Piece& p) {
      std::vector<Index> j = i;
      const int64_t lift = (p.offset / p.size + 1) * p.size;  // keeps the argument of the modulo >= 0
      j[dim] = mod(add(i[dim], Index::of(lift - p.offset)), p.size, c.ranges);
      return cast(piece_loader(p)(j, c), dt);
    };
    ExprPtr v = at(pieces.back());
    for (size_t k = pieces.size() - 1; k-- > 0;) {
      ExprPtr inside = binary(BinaryOp::kLt, index_value(i[dim], DType::kInt64), constant(static_cast<double>(pieces[k].offset + pieces[k].size), DType::kInt64),
                              DType::kBool);
      ExprPtr here = at(pieces[k]);
      v = where(inside, here, v, dt);
    }
    return v;
  }, cost);
  L.value(out).realize = regions;
  for (const Piece& p : pieces) L.value(out).transcendental |= L.value(p.value).transcendental;
  return true;
}

}  // namespace kiln::lowering
