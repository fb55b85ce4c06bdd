// Renders kernels to C++; see cpp_codegen.h.
#include "codegen/cpp/cpp_codegen.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "codegen/common/op_spelling.h"
#include "support/str_builder.h"

namespace kiln::codegen {
using namespace ir;
using support::StrBuilder;

std::string prefix_header() {
  static const char* text =
#include "kiln_prefix.inc"
      ;
  return text;
}

std::string compile_flags() {
  // -fno-trapping-math lets loops with selects vectorize (softmax is 7x slower without it); it
  // also lets GCC fold float -> integer -> float into trunc(), see kiln::int_to_float.
  // -ffp-contract=off: a * b + c rounds twice, as in eager (see kiln::madd in the prefix header).
  std::string f = "-O3 -march=native -fopenmp -fno-math-errno -fno-trapping-math -ffp-contract=off -std=c++17 -fPIC -fvisibility=hidden -w";
#ifdef KILN_SANITIZE_KERNELS
  // A sanitized kiln checks its kernels too: they load into the same instrumented process.
  f += " -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined";
#endif
  return f;
}

namespace {

// Programs generated for runtime sizes (ir/size_template.h): how integers that depend on the
// size symbols are spelled, for the generate_cpp call running on this thread (null: every
// integer is a literal, the code of a static-shape graph).
thread_local const IntSpelling* t_spelling = nullptr;
thread_local int t_num_symbols = 0;

// An integer field of the program as C++: its symbolic spelling, else its literal.
std::string I(const int64_t& v) {
  if (t_spelling) {
    auto it = t_spelling->find(&v);
    if (it != t_spelling->end()) return it->second;
  }
  return std::to_string(v);
}
bool is_symbolic(const int64_t& v) { return t_spelling && t_spelling->count(&v); }

// A product of integer fields: its literal value when none is symbolic, else the product of spellings.
struct Product {
  int64_t value = 1;       // at the sizes of the program being rendered (decisions that only affect speed)
  std::string symbolic;    // empty when the product is a literal
  void times(const int64_t& v) {
    value *= v;
    if (is_symbolic(v)) symbolic += (symbolic.empty() ? "" : "*") + I(v);
    else literal_ *= v;
  }
  std::string str() const {
    if (symbolic.empty()) return std::to_string(value);
    return literal_ == 1 ? "(" + symbolic + ")" : "(" + std::to_string(literal_) + "*" + symbolic + ")";
  }
 private:
  int64_t literal_ = 1;
};

std::string index_str(const Index& i) { return i.to_string(t_spelling); }

// Temporaries hold bf16 values as float.
const char* temp_type(DType t) { return t == DType::kBFloat16 ? "float" : dtype_ctype(t); }

std::string literal(double v, DType t) {
  char buf[64];
  if (t == DType::kBool) return v != 0 ? "true" : "false";
  if (!is_floating(t)) {
    std::snprintf(buf, sizeof buf, "int64_t(%lld)", static_cast<long long>(v));
    return std::string("static_cast<") + temp_type(t) + ">(" + buf + ")";
  }
  if (std::isnan(v)) return std::string("static_cast<") + temp_type(t) + ">(__builtin_nan(\"\"))";
  if (std::isinf(v)) return std::string(v > 0 ? "" : "-") + "static_cast<" + temp_type(t) + ">(__builtin_inf())";
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return std::string("static_cast<") + temp_type(t) + ">(" + buf + ")";
}

// Emits statements computing an expression; identical nodes (by identity) are computed once.
class ExprEmitter {
 public:
  ExprEmitter(const Program& p, StrBuilder& out, std::string indent) : p_(p), out_(out), indent_(std::move(indent)) {}
  std::string emit(const ExprPtr& e) {
    auto it = memo_.find(e.get());
    if (it != memo_.end()) return it->second;
    std::string v = "t" + std::to_string(next_++);
    std::string rhs = render(e);
    out_ << indent_ << "const " << temp_type(e->dtype) << " " << v << " = " << rhs << ";\n";
    memo_[e.get()] = v;
    return v;
  }

 private:
  std::string render(const ExprPtr& e) {
    const DType t = e->dtype;
    switch (e->kind) {
      case Expr::kConst:
        if (t_spelling) {  // an element count of runtime sizes
          auto it = t_spelling->find(&e->value);
          if (it != t_spelling->end()) return std::string("static_cast<") + temp_type(t) + ">(" + it->second + ")";
        }
        return literal(e->value, t);
      case Expr::kIndexValue: return std::string("static_cast<") + temp_type(t) + ">(" + index_str(e->index) + ")";
      case Expr::kLocal: return "r" + std::to_string(e->local) + "_" + std::to_string(e->local_part);
      case Expr::kLoad: {
        std::string idx = index_str(e->index);
        for (const auto& ind : e->indirect) {
          std::string v = emit(ind.value);
          idx += " + " + I(ind.stride) + " * kiln::checked_index(static_cast<int64_t>(" + v + "), " + I(ind.bound) + ", kiln_err)";
        }
        std::string a = "b" + std::to_string(e->buffer) + "[" + idx + "]";
        if (p_.buffers[e->buffer].dtype == DType::kBFloat16) return "kiln::to_float(" + a + ")";
        return a;
      }
      case Expr::kCast: {
        std::string a = emit(e->args[0]);
        if (t == DType::kBool) return "(" + a + " != 0)";
        if (is_floating(t) && !is_floating(e->args[0]->dtype)) return std::string("kiln::int_to_float<") + temp_type(t) + ">(" + a + ")";
        if (!is_floating(t) && is_floating(e->args[0]->dtype)) return std::string("kiln::float_to_int<") + temp_type(t) + ">(" + a + ")";
        return std::string("static_cast<") + temp_type(t) + ">(" + a + ")";
      }
      case Expr::kWhere: {
        std::string c = emit(e->args[0]), a = emit(e->args[1]), b = emit(e->args[2]);
        return "(" + c + " ? " + a + " : " + b + ")";
      }
      case Expr::kUnary: {
        std::string a = emit(e->args[0]);
        UnaryOp op = e->unary_op;
        if (info(op).is(kOpLogicalOnBool) && e->args[0]->dtype == DType::kBool) op = UnaryOp::kNot;
        return spell(info(op).cpp, a, "", temp_type(e->args[0]->dtype));
      }
      case Expr::kBinary: {
        std::string a = emit(e->args[0]), b = emit(e->args[1]);
        return spell(info(e->binary_op).cpp, a, b, temp_type(e->args[0]->dtype));
      }
    }
    return "0";
  }
  const Program& p_;
  StrBuilder& out_;
  std::string indent_;
  std::map<const Expr*, std::string> memo_;
  int next_ = 0;
};

std::string store(const Program& p, int buf, const std::string& index, const std::string& v) {
  if (p.buffers[buf].dtype == DType::kBFloat16) return "b" + std::to_string(buf) + "[" + index + "] = kiln::to_bf16(" + v + ");";
  return "b" + std::to_string(buf) + "[" + index + "] = " + v + ";";
}

std::string init_value(ReduceOp red, DType t) {
  switch (info(red).identity) {
    case ReduceIdentity::kOne: return literal(1, t);
    case ReduceIdentity::kLowest: return is_floating(t) ? literal(-INFINITY, t) : integer_limit(t, false, temp_type(t));
    case ReduceIdentity::kHighest: return is_floating(t) ? literal(INFINITY, t) : integer_limit(t, true, temp_type(t));
    default: return literal(0, t);
  }
}

std::string combine(ReduceOp red, const std::string& a, const std::string& b) { return spell(info(red).combine, a, b); }

void emit_stage(const Program& p, const Kernel& k, const Stage& s, StrBuilder& b, const std::string& ind, bool parallel_inner) {
  const int n_outer = static_cast<int>(k.outer_sizes.size());
  const int n_inner = static_cast<int>(s.inner_sizes.size());
  std::string in = ind;
  if (s.kind == Stage::kPointwise) {
    b << ind << "{\n";
    for (int j = 0; j < n_inner; ++j) {
      int v = n_outer + j;
      if (j == n_inner - 1) b << in << (parallel_inner ? "#pragma omp parallel for simd if(" + I(s.inner_sizes[j]) + " > 16384)\n" : "#pragma omp simd\n");
      b << in << "for (int64_t x" << v << " = 0; x" << v << " < " << I(s.inner_sizes[j]) << "; ++x" << v << ") {\n";
      in += "  ";
    }
    ExprEmitter em(p, b, in + "  ");
    std::string v = em.emit(s.value);
    b << in << "  " << store(p, s.out_buffer, index_str(s.out_index), v) << "\n";
    for (int j = 0; j < n_inner; ++j) {
      in.resize(in.size() - 2);
      b << in << "}\n";
    }
    b << ind << "}\n";
    return;
  }
  // Reduction.
  const char* T = temp_type(s.acc_dtype);
  const std::string r = "r" + std::to_string(s.local);
  const bool welford = s.reduce == ReduceOp::kWelford;
  const bool arg = s.reduce == ReduceOp::kArgMax || s.reduce == ReduceOp::kArgMin;
  // Accumulator lanes of plain reductions (Welford and arg reductions keep 16).
  const int W = welford || arg ? 16 : 64;
  const std::string arg_update = std::string("kiln::arg_update<") + (s.reduce == ReduceOp::kArgMax ? "true" : "false") + ">";
  const std::string last = n_inner ? I(s.inner_sizes.back()) : "1";
  const int lv = n_outer + n_inner - 1;  // innermost variable
  // Position within the reduced range (row-major over the inner variables), for argmax/argmin.
  std::string position = "0";
  for (int j = 0; j < n_inner; ++j)
    position = j ? "(" + position + ") * " + I(s.inner_sizes[j]) + " + x" + std::to_string(n_outer + j) : "x" + std::to_string(n_outer);
  // A float max or min keeps its NaNs apart: each lane takes a plain compare-select (one
  // instruction on the accumulator's dependence chain, where maxnan's NaN test and blend made
  // three) and a second lane array catches any NaN, merged once after the fold (softmax's row
  // max: the kernel 8% faster on one core).
  const bool nan_apart = (s.reduce == ReduceOp::kMax || s.reduce == ReduceOp::kMin) && is_floating(s.acc_dtype);
  const char* select_op = s.reduce == ReduceOp::kMax ? " > " : " < ";
  // One accumulation into lane `l` ("lanes[l]", ...) of the value `v`.
  auto fold = [&](const std::string& l, const std::string& v, const std::string& inv) -> std::string {
    if (welford) return "kiln::welford_add(mean[" + l + "], m2[" + l + "], " + v + ", " + inv + ");";
    if (arg) return arg_update + "(lanes[" + l + "], lidx[" + l + "], " + v + ", " + position + ");";
    const std::string lane = "lanes[" + l + "]";
    if (nan_apart)
      return "{ const " + std::string(T) + " u = " + v + "; " + lane + " = " + lane + select_op + "u ? " + lane + " : u; nans[" + l + "] = u != u ? u : nans[" + l + "]; }";
    return lane + " = " + combine(s.reduce, lane, v) + ";";
  };
  // When the stage keeps its elements, each is stored before it is folded.
  auto keep = [&](const std::string& v) { return s.out_buffer < 0 ? std::string() : store(p, s.out_buffer, index_str(s.out_index), v) + " "; };
  auto accumulate = [&](const std::string& l, const std::string& v, const std::string& inv) { return keep(v) + fold(l, v, inv); };
  if (welford) {
    b << ind << T << " " << r << "_0, " << r << "_1;\n" << ind << "{\n";
    b << ind << "  " << T << " mean[16] = {0}, m2[16] = {0}; " << T << " cnt = 0, tn = 0, tmean = 0, tm2 = 0;\n";
  } else if (arg) {
    b << ind << T << " " << r << "_0; int64_t " << r << "_1;\n" << ind << "{\n";
    b << ind << "  " << T << " lanes[16] = {}; int64_t lidx[16];\n" << ind << "  for (int l = 0; l < 16; ++l) lidx[l] = -1;\n";
  } else {
    b << ind << T << " " << r << "_0;\n" << ind << "{\n";
    b << ind << "  " << T << " lanes[" << W << "];\n" << ind << "  for (int l = 0; l < " << W << "; ++l) lanes[l] = " << init_value(s.reduce, s.acc_dtype) << ";\n";
    if (nan_apart) b << ind << "  " << T << " nans[" << W << "] = {};\n";
  }
  in = ind + "  ";
  for (int j = 0; j + 1 < n_inner; ++j) {
    int v = n_outer + j;
    b << in << "for (int64_t x" << v << " = 0; x" << v << " < " << I(s.inner_sizes[j]) << "; ++x" << v << ") {\n";
    in += "  ";
  }
  if (n_inner == 0) {
    ExprEmitter em(p, b, in);
    std::string v = em.emit(s.value);
    b << in << keep(v);
    if (welford) b << "tn = 1; tmean = " << v << "; tm2 = 0;\n";
    else if (arg) b << "lanes[0] = " << v << "; lidx[0] = 0;\n";
    else b << "lanes[0] = " << v << ";\n";
  } else {
    b << in << "int64_t base = 0;\n";
    // Whole blocks of `width` elements, one accumulator lane each (vectorized across lanes).
    auto blocks = [&](int width) {
      b << in << "for (; base + " << width << " <= " << last << "; base += " << width << ") {\n";
      if (welford) b << in << "  cnt += 1; const " << T << " inv = " << T << "(1) / cnt;\n";
      b << in << "  #pragma omp simd\n" << in << "  for (int64_t l = 0; l < " << width << "; ++l) {\n";
      b << in << "    const int64_t x" << lv << " = base + l;\n";
      ExprEmitter em(p, b, in + "    ");
      std::string v = em.emit(s.value);
      b << in << "    " << accumulate("l", v, "inv") << "\n";
      b << in << "  }\n" << in << "}\n";
    };
    if (W > 16) blocks(W);  // four independent vector accumulators hide the add's latency
    blocks(16);
    b << in << "for (; base < " << last << "; ++base) {\n" << in << "  const int64_t x" << lv << " = base;\n";
    {
      ExprEmitter em(p, b, in + "  ");
      std::string v = em.emit(s.value);
      if (welford) b << in << "  tn += 1; " << keep(v) << "kiln::welford_add(tmean, tm2, " << v << ", " << T << "(1) / tn);\n";
      else b << in << "  " << accumulate("0", v, "") << "\n";
    }
    b << in << "}\n";
  }
  for (int j = 0; j + 1 < n_inner; ++j) {
    in.resize(in.size() - 2);
    b << in << "}\n";
  }
  if (welford) {
    b << ind << "  " << T << " n = 0, mu = 0, q = 0;\n";
    b << ind << "  for (int l = 0; l < 16; ++l) kiln::welford_merge(n, mu, q, cnt, mean[l], m2[l]);\n";
    b << ind << "  kiln::welford_merge(n, mu, q, tn, tmean, tm2);\n";
    b << ind << "  " << r << "_0 = mu; " << r << "_1 = q;\n";
  } else if (arg) {
    b << ind << "  " << T << " acc = lanes[0]; int64_t at = lidx[0];\n";
    b << ind << "  for (int l = 1; l < 16; ++l) if (lidx[l] >= 0) " << arg_update << "(acc, at, lanes[l], lidx[l]);\n";
    b << ind << "  " << r << "_0 = acc; " << r << "_1 = at;\n";
  } else {
    // The lanes folded pairwise (log2(W) vector steps; one after another, a row of a few hundred
    // elements spent more time here than in its blocks).
    b << ind << "  for (int w = " << W / 2 << "; w > 0; w /= 2)\n";
    b << ind << "    for (int l = 0; l < w; ++l) lanes[l] = " << combine(s.reduce, "lanes[l]", "lanes[l + w]") << ";\n";
    b << ind << "  " << r << "_0 = lanes[0];\n";
    if (nan_apart) b << ind << "  for (int l = 0; l < " << W << "; ++l) " << r << "_0 = nans[l] != nans[l] ? nans[l] : " << r << "_0;\n";
  }
  b << ind << "}\n";
  for (size_t part = 0; part < s.store_buffers.size(); ++part)
    if (s.store_buffers[part] >= 0)
      b << ind << store(p, s.store_buffers[part], index_str(s.store_index[part]), r + "_" + std::to_string(part)) << "\n";
}

void collect_loads(const ExprPtr& e, std::vector<const Expr*>& out) {
  if (e->kind == Expr::kLoad) out.push_back(e.get());
  for (const auto& a : e->args) collect_loads(a, out);
  for (const auto& i : e->indirect) collect_loads(i.value, out);
}

// A kernel that reduces (then maps each result: a cast, a division by the count), where the
// elements are contiguous along the last kept dimension and not along the reduced one (a column
// sum: a bias gradient, a mean over the batch, a norm's weight gradient, whose per-row mean and
// rstd do not vary along the columns). Row order would read one element per cache line;
// these kernels run the reduction outside and keep a block of adjacent outputs' accumulators, so the
// innermost loop walks memory contiguously.
constexpr int kColumnBlock = 64;  // adjacent outputs per accumulator block: four cache lines of floats

bool is_column_reduction(const Kernel& k) {
  if (k.stages.empty() || k.outer_sizes.empty()) return false;
  for (size_t i = 1; i < k.stages.size(); ++i)
    if (k.stages[i].kind != Stage::kPointwise || !k.stages[i].inner_sizes.empty()) return false;
  const Stage& s = k.stages[0];
  const bool plain = s.reduce != ReduceOp::kWelford && s.reduce != ReduceOp::kArgMax && s.reduce != ReduceOp::kArgMin;
  if (s.kind != Stage::kReduction || !plain || s.out_buffer >= 0 || s.inner_sizes.empty()) return false;
  const int col = static_cast<int>(k.outer_sizes.size()) - 1;
  const int lv = col + static_cast<int>(s.inner_sizes.size());
  std::vector<const Expr*> loads;
  collect_loads(s.value, loads);
  bool column = false;
  for (const Expr* l : loads) {
    // Loads that do not vary along the columns (a per-row statistic) stay out of the way.
    if (!l->indirect.empty() || (l->index.coefficient_of(lv) == 1 && l->index.coefficient_of(col) != 0)) return false;
    column |= l->index.coefficient_of(col) == 1;
  }
  // A symbolic column count is taken as wide: the code of runtime sizes must not depend on the
  // sample it was generated from (one cache entry for every size), and blocks cover any width.
  return column && (is_symbolic(k.outer_sizes.back()) || k.outer_sizes.back() >= 8);
}

void emit_column_reduction(const Program& p, const Kernel& k, StrBuilder& b, const std::string& work) {
  const Stage& s = k.stages[0];
  const int n_outer = static_cast<int>(k.outer_sizes.size()), n_inner = static_cast<int>(s.inner_sizes.size());
  const int col = n_outer - 1;
  const std::string cols = I(k.outer_sizes.back());
  const std::string blocks = is_symbolic(k.outer_sizes.back()) ? "((" + cols + " + " + std::to_string(kColumnBlock - 1) + ") / " + std::to_string(kColumnBlock) + ")"
                                                              : std::to_string((k.outer_sizes.back() + kColumnBlock - 1) / kColumnBlock);
  const std::string W = std::to_string(kColumnBlock);
  const char* T = temp_type(s.acc_dtype);
  b << "  #pragma omp parallel for collapse(" << n_outer << ") if(" << work << " > 16384)\n";
  std::string ind = "  ";
  for (int j = 0; j < col; ++j) {
    b << ind << "for (int64_t x" << j << " = 0; x" << j << " < " << I(k.outer_sizes[j]) << "; ++x" << j << ") {\n";
    ind += "  ";
  }
  b << ind << "for (int64_t blk = 0; blk < " << blocks << "; ++blk) {\n";
  std::string in = ind + "  ";
  b << in << "const int64_t left = " << cols << " - blk * " << W << ", width = left < " << W << " ? left : " << W << ";\n";
  b << in << T << " lanes[" << W << "];\n" << in << "for (int l = 0; l < " << W << "; ++l) lanes[l] = " << init_value(s.reduce, s.acc_dtype) << ";\n";
  for (int j = 0; j < n_inner; ++j) {
    int v = n_outer + j;
    b << in << "for (int64_t x" << v << " = 0; x" << v << " < " << I(s.inner_sizes[j]) << "; ++x" << v << ") {\n";
    in += "  ";
  }
  b << in << "#pragma omp simd\n" << in << "for (int64_t l = 0; l < width; ++l) {\n";
  b << in << "  const int64_t x" << col << " = blk * " << W << " + l;\n";
  {
    ExprEmitter em(p, b, in + "  ");
    std::string v = em.emit(s.value);
    b << in << "  lanes[l] = " << combine(s.reduce, "lanes[l]", v) << ";\n";
  }
  b << in << "}\n";
  for (int j = 0; j < n_inner; ++j) {
    in.resize(in.size() - 2);
    b << in << "}\n";
  }
  const std::string r = "r" + std::to_string(s.local);
  b << in << "for (int64_t l = 0; l < width; ++l) {\n" << in << "  const int64_t x" << col << " = blk * " << W << " + l;\n";
  b << in << "  const " << T << " " << r << "_0 = lanes[l];\n";
  for (size_t part = 0; part < s.store_buffers.size(); ++part)
    if (s.store_buffers[part] >= 0) b << in << "  " << store(p, s.store_buffers[part], index_str(s.store_index[part]), r + "_0") << "\n";
  for (size_t i = 1; i < k.stages.size(); ++i) {  // each in its own scope (temporaries restart at t0)
    b << in << "  {\n";
    ExprEmitter em(p, b, in + "    ");
    std::string v = em.emit(k.stages[i].value);
    b << in << "    " << store(p, k.stages[i].out_buffer, index_str(k.stages[i].out_index), v) << "\n" << in << "  }\n";
  }
  b << in << "}\n" << ind << "}\n";
  for (int j = 0; j < col; ++j) {
    ind.resize(ind.size() - 2);
    b << ind << "}\n";
  }
}

void emit_kernel(const Program& p, const Kernel& k, StrBuilder& b) {
  b << "// " << k.name << ": ";
  b.join(k.fused);
  b << "\nKILN_EXPORT void " << k.name << "(void** bufs) {\n";
  std::set<int> used, written;
  for (const Stage& s : k.stages) {
    loaded_buffers(s.value, used);
    for (int w : stage_outputs(s)) written.insert(w);
  }
  for (int w : written) used.insert(w);
  for (int u : used) {
    const char* ct = dtype_ctype(p.buffers[u].dtype);
    b << "  " << (written.count(u) ? "" : "const ") << ct << "* __restrict b" << u << " = static_cast<" << (written.count(u) ? "" : "const ") << ct << "*>(bufs[" << u << "]);\n";
  }
  // The run's error flag follows the buffers in the table (see the prefix header).
  b << "  int* kiln_err = static_cast<int*>(bufs[" << p.buffers.size() << "]); (void)kiln_err;\n";
  // Kernels for runtime sizes read the size symbols from the entry after the error flag.
  if (t_spelling) {
    b << "  const int64_t* kiln_sizes = static_cast<const int64_t*>(bufs[" << p.buffers.size() + 1 << "]);\n";
    for (int i = 0; i < t_num_symbols; ++i) b << "  const int64_t s" << i << " = kiln_sizes[" << i << "]; (void)s" << i << ";\n";
  }
  const int n_outer = static_cast<int>(k.outer_sizes.size());
  // The work of the kernel (parallel only above a threshold): outer elements times the largest
  // stage's inner elements, computed at run time where sizes are symbolic.
  Product outer;
  for (const int64_t& s : k.outer_sizes) outer.times(s);
  const int64_t outer_numel = outer.value;
  std::string work;
  {
    std::vector<Product> stages;
    bool symbolic = !outer.symbolic.empty();
    for (const Stage& s : k.stages) {
      Product w;
      for (const int64_t& x : s.inner_sizes) w.times(x);
      symbolic = symbolic || !w.symbolic.empty();
      stages.push_back(w);
    }
    if (!symbolic) {
      int64_t m = 1;
      for (const Product& w : stages) m = std::max(m, w.value);
      work = std::to_string(m * outer_numel);
    } else {
      // Computed once at the kernel's entry: the largest stage's inner elements, then times the outer ones.
      int64_t literal = 1;
      std::set<std::string> symbolic;
      for (const Product& w : stages) {
        if (w.symbolic.empty()) literal = std::max(literal, w.value);
        else symbolic.insert(w.str());
      }
      b << "  int64_t kiln_work = " << literal << ";\n";
      for (const std::string& w : symbolic) b << "  if (" << w << " > kiln_work) kiln_work = " << w << ";\n";
      b << "  kiln_work *= " << outer.str() << ";\n";
      work = "kiln_work";
    }
  }
  if (is_column_reduction(k)) {
    emit_column_reduction(p, k, b, work);
    b << "}\n\n";
    return;
  }
  bool parallel_inner = n_outer == 0 || (outer_numel == 1);
  std::string ind = "  ";
  if (!parallel_inner && outer_numel > 0) {
    b << "  #pragma omp parallel for" << (n_outer > 1 ? " collapse(" + std::to_string(n_outer) + ")" : std::string()) << " if(" << work << " > 16384)\n";
  }
  for (int j = 0; j < n_outer; ++j) {
    b << ind << "for (int64_t x" << j << " = 0; x" << j << " < " << I(k.outer_sizes[j]) << "; ++x" << j << ") {\n";
    ind += "  ";
  }
  for (const Stage& s : k.stages) emit_stage(p, k, s, b, ind, parallel_inner && s.kind == Stage::kPointwise && k.stages.size() == 1);
  for (int j = 0; j < n_outer; ++j) {
    ind.resize(ind.size() - 2);
    b << ind << "}\n";
  }
  b << "}\n\n";
}

}  // namespace

std::vector<std::string> generate_cpp(const Program& p, int max_units, size_t bytes_per_unit, const SizeSymbols* sizes) {
  struct Scope {  // the spelling holds for this call only
    explicit Scope(const SizeSymbols* s) {
      t_spelling = s ? &s->spelling : nullptr;
      t_num_symbols = s ? s->num_symbols : 0;
    }
    ~Scope() { t_spelling = nullptr; t_num_symbols = 0; }
  } scope(sizes);
  std::vector<std::string> kernels;
  size_t total = 0;
  for (const Kernel& k : p.kernels) {
    StrBuilder b;
    emit_kernel(p, k, b);
    kernels.push_back(b.str());
    total += kernels.back().size();
  }
  // One unit per `bytes_per_unit` of source (prefix included), at most `max_units`; consecutive
  // kernels, about equal amounts of source per unit.
  int units = max_units;
  if (bytes_per_unit) units = std::min<int>(units, static_cast<int>((prefix_header().size() + total) / bytes_per_unit) + 1);
  units = std::max(1, std::min<int>(units, static_cast<int>(kernels.size())));
  std::vector<std::string> out(units);
  for (auto& u : out) u = prefix_header() + "\n";
  size_t done = 0;
  for (const std::string& k : kernels) {
    size_t u = std::min<size_t>(units - 1, done * units / std::max<size_t>(total, 1));
    out[u] += k;
    done += k.size();
  }
  return out;
}

}  // namespace kiln::codegen
