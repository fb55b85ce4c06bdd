// Constructors and the textual form of the loop IR.
#include "ir/loop_ir.h"

#include "support/str_builder.h"

namespace kiln::ir {
using support::StrBuilder;

int64_t Buffer::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

Index Buffer::element_index(const std::vector<Index>& idx) const {
  Index e = Index::of(offset);
  for (size_t d = 0; d < idx.size(); ++d)
    if (sizes[d] != 1) e = add(e, mul(idx[d], strides[d]));
  return e;
}

static std::shared_ptr<Expr> make(Expr::Kind k, DType t) {
  auto e = std::make_shared<Expr>();
  e->kind = k;
  e->dtype = t;
  return e;
}

ExprPtr load(int buffer, DType dtype, Index index) {
  auto e = make(Expr::kLoad, dtype);
  e->buffer = buffer;
  e->index = std::move(index);
  return e;
}
ExprPtr constant(double v, DType dtype) {
  auto e = make(Expr::kConst, dtype);
  e->value = v;
  return e;
}
ExprPtr unary(UnaryOp op, ExprPtr a, DType out) {
  auto e = make(Expr::kUnary, out);
  e->unary_op = op;
  e->args = {std::move(a)};
  return e;
}
ExprPtr binary(BinaryOp op, ExprPtr a, ExprPtr b, DType out) {
  auto e = make(Expr::kBinary, out);
  e->binary_op = op;
  e->args = {std::move(a), std::move(b)};
  return e;
}
ExprPtr where(ExprPtr c, ExprPtr a, ExprPtr b, DType out) {
  auto e = make(Expr::kWhere, out);
  e->args = {std::move(c), std::move(a), std::move(b)};
  return e;
}
ExprPtr cast(ExprPtr a, DType to) {
  if (a->dtype == to) return a;
  auto e = make(Expr::kCast, to);
  e->args = {std::move(a)};
  return e;
}
ExprPtr index_value(Index i, DType dtype) {
  auto e = make(Expr::kIndexValue, dtype);
  e->index = std::move(i);
  return e;
}

int expr_size(const ExprPtr& e) {
  int n = 1;
  for (const auto& a : e->args) n += expr_size(a);
  for (const auto& ind : e->indirect) n += expr_size(ind.value);
  return n;
}

std::vector<int> stage_outputs(const Stage& s) {
  std::vector<int> out;
  if (s.out_buffer >= 0) out.push_back(s.out_buffer);
  for (int b : s.store_buffers)
    if (b >= 0) out.push_back(b);
  return out;
}

void loaded_buffers(const ExprPtr& e, std::set<int>& out) {
  if (e->kind == Expr::kLoad) out.insert(e->buffer);
  for (const auto& a : e->args) loaded_buffers(a, out);
  for (const auto& i : e->indirect) loaded_buffers(i.value, out);
}

std::vector<std::vector<int>> kernel_allocations(const Program& p) {
  std::vector<std::vector<int>> out(p.kernels.size());
  std::vector<bool> seen(p.buffers.size(), false);
  for (size_t k = 0; k < p.kernels.size(); ++k)
    for (const Stage& s : p.kernels[k].stages)
      for (int b : stage_outputs(s))
        if (!seen[b]) seen[b] = true, out[k].push_back(b);
  return out;
}

std::string expr_string(const ExprPtr& e) {
  StrBuilder b;
  switch (e->kind) {
    case Expr::kLoad:
      b << "buf" << e->buffer << "[" << e->index.to_string();
      for (const auto& ind : e->indirect) b << " + " << ind.stride << "*" << expr_string(ind.value);
      b << "]";
      break;
    case Expr::kConst: b << dtype_name(e->dtype) << "(" << e->value << ")"; break;
    case Expr::kIndexValue: b << dtype_name(e->dtype) << "(index(" << e->index.to_string() << "))"; break;
    case Expr::kLocal: b << "r" << e->local << (e->local_part ? "." + std::to_string(e->local_part) : ""); break;
    case Expr::kCast: b << dtype_name(e->dtype) << "(" << expr_string(e->args[0]) << ")"; break;
    case Expr::kWhere: b << "where(" << expr_string(e->args[0]) << ", " << expr_string(e->args[1]) << ", " << expr_string(e->args[2]) << ")"; break;
    default:  // unary and binary operators; the result type shows where it is not the first operand's
      b << (e->kind == Expr::kUnary ? op_name(e->unary_op) : op_name(e->binary_op));
      if (!e->args.empty() && e->args[0]->dtype != e->dtype) b << ":" << dtype_name(e->dtype);
      b << "(";
      for (size_t i = 0; i < e->args.size(); ++i) b << (i ? ", " : "") << expr_string(e->args[i]);
      b << ")";
  }
  return b.str();
}

template <class T>
static std::string list(const std::vector<T>& v) {
  StrBuilder b;
  b << "[";
  b.join(v) << "]";
  return b.str();
}

std::string kernel_string(const Kernel& k, const Program& p) {
  StrBuilder b;
  b << "kernel " << k.name << " outer" << list(k.outer_sizes) << "  # " ;
  b.join(k.fused);
  b << "\n";
  for (const Stage& s : k.stages) {
    if (s.kind == Stage::kPointwise) {
      b << "  for" << list(s.inner_sizes) << ": buf" << s.out_buffer << "[" << s.out_index.to_string() << "] = " << expr_string(s.value) << "\n";
    } else {
      b << "  r" << s.local << " = " << op_name(s.reduce) << " over" << list(s.inner_sizes) << " of " << expr_string(s.value);
      if (s.out_buffer >= 0) b << "; each -> buf" << s.out_buffer << "[" << s.out_index.to_string() << "]";
      for (size_t i = 0; i < s.store_buffers.size(); ++i)
        if (s.store_buffers[i] >= 0) b << "; buf" << s.store_buffers[i] << "[" << s.store_index[i].to_string() << "] = r" << s.local << "." << i;
      b << "\n";
    }
  }
  return b.str();
}

std::string Program::to_string() const {
  StrBuilder b;
  static const char* kinds[] = {"input", "constant", "kernel", "extern"};
  for (size_t i = 0; i < buffers.size(); ++i) {
    const Buffer& x = buffers[i];
    b << "buf" << i << ": " << kinds[x.kind] << " " << dtype_name(x.dtype) << list(x.sizes) << list(x.strides);
    if (x.offset) b << "+" << x.offset;
    if (x.kind == Buffer::kInput || x.kind == Buffer::kConstant) b << " #" << x.index;
    if (i < reuse_of.size() && reuse_of[i] >= 0) b << " reuses buf" << reuse_of[i];
    b << "\n";
  }
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    if (s.kind == Step::kKernel) b << kernel_string(kernels[s.kernel], *this);
    else b << "extern node " << s.node << (s.op.empty() ? "" : " " + s.op) << " args" << list(s.args) << " -> " << list(s.outputs) << "\n";
    if (i < frees.size() && !frees[i].empty()) b << "  free " << list(frees[i]) << "\n";
  }
  b << "return " << list(outputs) << "\n";
  for (auto [input, buf] : input_mutations) b << "input " << input << " <- buf" << buf << "\n";
  return b.str();
}

}  // namespace kiln::ir
