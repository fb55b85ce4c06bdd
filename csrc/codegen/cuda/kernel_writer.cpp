// KernelWriter's strategy and launch choice, the kernel's body and stages, and the element and
// vector-group loops of its stages (see kernel_writer.h).
#include "codegen/cuda/kernel_writer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "codegen/common/op_spelling.h"
#include "support/str_builder.h"

namespace kiln::codegen::cuda {

CudaKernel KernelWriter::write(StrBuilder& b, const std::string& name) {
  CudaKernel info;
  info.name = name;
  info.index32 = !config_.index64 && kernel_fits_int32(p_, k_);
  IT_ = info.index32 ? "int" : "long long";
  rows_ = product(k_.outer_sizes);
  choose_strategy();
  info.strategy = strategy_name(strategy_);
  for (const Stage& s : k_.stages) info.checks = info.checks || stage_checks(s);

  StrBuilder body;
  emit_body(body);
  // Parameters: every buffer the kernel reads or writes, then the error flag.
  std::set<int> used, written;
  for (const Stage& s : k_.stages) {
    for_each_node(s.value, [&](const Expr& e) {
      if (e.kind == Expr::kLoad) used.insert(e.buffer);
    });
    for (int w : stage_outputs(s)) written.insert(w);
  }
  used.insert(written.begin(), written.end());
  b << "// " << name << " (" << info.strategy << "): ";
  b.join(k_.fused);
  b << "\nKILN_KERNEL void " << name << "(";
  for (int u : used) {
    const char* ct = cuda_ctype(p_.buffers[u].dtype);
    b << (written.count(u) ? "" : "const ") << ct << "* __restrict__ b" << u << ", ";
    info.params.push_back(u);
  }
  b << "int* __restrict__ kiln_err";
  // Kernels for runtime sizes: the size symbols, in the index type (32-bit math holds them:
  // every index of the kernel fits).
  for (int i = 0; i < symbols_; ++i) b << ", const " << IT_ << " s" << i;
  b << ") {\n";
  for (int i = 0; i < symbols_; ++i) b << "  (void)s" << i << ";\n";
  b << body.str() << "}\n\n";
  info.symbols = symbols_;

  info.vector_width = vector_width_;
  info.aligned.assign(aligned_.begin(), aligned_.end());
  info.launch = launch_;
  return info;
}

void KernelWriter::choose_strategy() {
  bool has_reduction = false;
  int64_t widest = 1;
  // Runtime sizes: a symbolic row length or row count cannot choose the strategy (the code
  // must be the same at every size); the length's literal factor does.
  bool widest_symbolic = false;
  int64_t widest_literal = 1;
  for (const Stage& s : k_.stages) {
    has_reduction = has_reduction || s.kind == Stage::kReduction;
    widest = std::max(widest, product(s.inner_sizes));
    if (any_symbolic(s.inner_sizes)) {
      widest_symbolic = true;
      int64_t lit = 1;
      for (const int64_t& n : s.inner_sizes) lit *= is_symbolic(n) ? 1 : n;
      widest_literal = std::max(widest_literal, lit);
    }
  }
  const bool rows_symbolic = any_symbolic(k_.outer_sizes);
  if (!has_reduction) {
    strategy_ = Strategy::kPointwise;
    block_ = config_.block ? config_.block : kPointwiseBlock;
    return;
  }
  // A column reduction reads with a stride along its reduced loop and contiguously across
  // rows: a thread per row makes neighbouring threads read neighbouring elements.
  bool column = false;
  if (n_outer_ > 0) {
    const int last_outer = n_outer_ - 1;
    for (const Stage& s : k_.stages) {
      if (s.kind != Stage::kReduction || s.inner_sizes.empty()) continue;
      const int inner_last = n_outer_ + static_cast<int>(s.inner_sizes.size()) - 1;
      for_each_node(s.value, [&](const Expr& e) {
        // (A load the reduced loop does not move, such as a row's token id, is no column.)
        if (e.kind == Expr::kLoad && e.index.coefficient_of(last_outer) == 1 && e.index.uses_var(inner_last) &&
            e.index.coefficient_of(inner_last) != 1)
          column = true;
      });
    }
  }
  Strategy s;
  if (config_.strategy >= 0) s = static_cast<Strategy>(config_.strategy);  // autotuning's choice
  else if (widest_symbolic) s = column && rows_symbolic ? Strategy::kRowPerThread : widest_literal >= 512 ? Strategy::kRowPerBlock : Strategy::kRowPerWarp;
  else if (widest <= 16 || (column && (rows_symbolic || rows_ >= 4096))) s = Strategy::kRowPerThread;
  else if (widest <= 1024) s = Strategy::kRowPerWarp;
  else s = Strategy::kRowPerBlock;
  if (config_.strategy < 0 && (split_ = row_split()) > 1) s = Strategy::kRowPerBlock;
  strategy_ = s;
  if (s == Strategy::kRowPerThread) {
    width_ = 1;
    block_ = config_.block ? config_.block : 128;
    launch_ = {static_cast<unsigned>((rows_ + block_ - 1) / block_), static_cast<unsigned>(block_)};
  } else if (s == Strategy::kRowPerWarp) {
    width_ = 32;
    block_ = config_.block ? config_.block : 256;
    const int64_t rows_per_block = block_ / 32;
    launch_ = {static_cast<unsigned>((rows_ + rows_per_block - 1) / rows_per_block), static_cast<unsigned>(block_)};
  } else {
    // About 8 to 16 elements per thread for a vectorized row of floats.
    int64_t b = 128;
    while (!widest_symbolic && b < 1024 && b * 16 < widest) b *= 2;
    if (widest_symbolic) b = 256;
    if (split_ > 1) b = 256;
    block_ = config_.block ? config_.block : static_cast<int>(b);
    width_ = block_;
    launch_ = {static_cast<unsigned>(rows_ * split_), static_cast<unsigned>(block_)};
  }
}

// Few rows, each with a bulk pointwise stage next to small reductions (a decoding step: the
// layer norm of 8 tokens fused with the copy of a 30 MB key cache into its concatenation): one
// block per row would leave most of the GPU idle. Each row then gets S blocks that all compute
// the row's reductions (small) and share its pointwise stages (block `part` takes every S-th
// group). Only where no stage reads what the kernel writes (blocks of a row do not synchronize)
// and the row count is a literal. Returns S (1: no split).
int KernelWriter::row_split() const {
  constexpr int64_t kTargetBlocks = 512;
  if (any_symbolic(k_.outer_sizes) || rows_ <= 0 || rows_ * 4 > kTargetBlocks) return 1;
  std::set<int> written;
  for (const Stage& st : k_.stages)
    for (int w : stage_outputs(st)) written.insert(w);
  bool reads_written = false, bulk = false;
  for (const Stage& st : k_.stages)
    for_each_node(st.value, [&](const Expr& e) {
      if (e.kind == Expr::kLoad && written.count(e.buffer)) reads_written = true;
    });
  if (reads_written) return 1;
  // A stage's size: (symbolic factors, literal product) of its inner sizes.
  auto size_of = [](const Stage& st) {
    int sym = 0;
    int64_t lit = 1;
    for (const int64_t& n : st.inner_sizes) is_symbolic(n) ? ++sym : lit *= n;
    return std::make_pair(sym, lit);
  };
  for (const Stage& pw : k_.stages) {
    if (pw.kind != Stage::kPointwise) continue;
    const auto [ps, pl] = size_of(pw);
    if (ps == 0 && pl < 65536) continue;
    bool larger = true;
    for (const Stage& r : k_.stages) {
      if (r.kind != Stage::kReduction) continue;
      const auto [rs, rl] = size_of(r);
      larger = larger && (ps > rs || (ps == rs && pl >= 64 * rl));
    }
    bulk = bulk || larger;
  }
  if (!bulk) return 1;
  return static_cast<int>(std::min<int64_t>(64, (kTargetBlocks + rows_ - 1) / rows_));
}

void KernelWriter::emit_body(StrBuilder& b) {
  if (strategy_ == Strategy::kPointwise) {
    int64_t work = 1;
    bool hoisted = false;
    for (const Stage& s : k_.stages) {
      const int64_t n = rows_ * product(s.inner_sizes);
      int V = stage_vector_width(s, 0, n_outer_ + static_cast<int>(s.inner_sizes.size()));
      work = std::max(work, (n + V - 1) / V);
      b << "  {  // stage: " << (s.out_buffer >= 0 ? "buf" + std::to_string(s.out_buffer) : std::string("?")) << "\n";
      hoisted = hoist_channel_invariants(b, "    ", s, V) || hoisted;
      std::string start = "static_cast<" + IT_ + ">(blockIdx.x) * blockDim.x + threadIdx.x";
      std::string step = "static_cast<" + IT_ + ">(gridDim.x) * blockDim.x";
      emit_space_loop(b, "    ", s, 0, start, step, V, pointwise_work(s));
      hoisted_.clear();
      b << "  }\n";
    }
    int64_t blocks = std::min<int64_t>(kMaxGrid, std::max<int64_t>(1, (work + block_ - 1) / block_));
    // Hoisted values pay off over the trips a thread makes: fewer blocks, each thread looping.
    if (hoisted) blocks = std::max(std::min(blocks, kHoistedMinBlocks), (blocks + kHoistedTrips - 1) / kHoistedTrips);
    launch_ = {static_cast<unsigned>(blocks), static_cast<unsigned>(block_)};
    return;
  }
  // Row kernels.
  switch (strategy_) {
    case Strategy::kRowPerThread:
      b << "  const " << IT_ << " row = static_cast<" << IT_ << ">(blockIdx.x) * blockDim.x + threadIdx.x;\n";
      lane_ = "0";
      break;
    case Strategy::kRowPerWarp:
      b << "  const " << IT_ << " row = static_cast<" << IT_ << ">(blockIdx.x) * " << block_ / 32 << " + (threadIdx.x >> 5);\n";
      b << "  const int lane = threadIdx.x & 31;\n";
      lane_ = "lane";
      break;
    default:
      if (split_ > 1) {
        b << "  const " << IT_ << " row = blockIdx.x / " << split_ << ";\n";
        b << "  const int part = blockIdx.x % " << split_ << ";  // this block's share of the row's pointwise stages\n";
      } else {
        b << "  const " << IT_ << " row = blockIdx.x;\n";
      }
      b << "  const int lane = threadIdx.x;\n";
      lane_ = "lane";
  }
  b << "  if (row >= " << product_text(k_.outer_sizes) << ") return;\n";
  define_vars(b, "  ", "row", 0, n_outer_);
  if (!config_.row_cache || split_ != 1) return emit_stages(b);
  // A row of a runtime length is cached in G groups per thread, G the most the register budget
  // holds (the same at every size): the kernel then has two bodies, the cached one for rows
  // that fit (fits_, a condition on the sizes) and the plain one for longer rows.
  symbolic_groups_ = symbolic_row_groups();
  StrBuilder cached;
  plan_caches(cached);
  emit_stages(cached);
  if (fits_.empty()) {
    b << cached.str();
    return;
  }
  clear_cache_plan();  // (fits_ stays: it guards the cached body)
  symbolic_groups_ = 0;
  StrBuilder plain;
  emit_stages(plain);
  b << "  if (";
  b.join(std::vector<std::string>(fits_.begin(), fits_.end()), " && ");
  b << ") {  // the row fits the row cache\n" << indented(cached.str()) << "  } else {\n" << indented(plain.str()) << "  }\n";
}

std::string KernelWriter::indented(const std::string& text) {
  std::string out;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size() - 1;
    out += "  " + text.substr(at, end + 1 - at);
    at = end + 1;
  }
  return out;
}

void KernelWriter::emit_stages(StrBuilder& b) {
  std::set<int> written;
  for (const Stage& s : k_.stages) {
    bool reads_written = false;
    for_each_node(s.value, [&](const Expr& e) {
      if (e.kind == Expr::kLoad && written.count(e.buffer)) reads_written = true;
    });
    if (reads_written && strategy_ == Strategy::kRowPerWarp) b << "  __syncwarp();\n";
    if (reads_written && strategy_ == Strategy::kRowPerBlock) b << "  __syncthreads();\n";
    if (s.kind == Stage::kPointwise) {
      b << "  {\n";
      const int V = stage_vector_width(s, n_outer_, n_outer_ + static_cast<int>(s.inner_sizes.size()));
      if (split_ > 1)
        emit_space_loop(b, "    ", s, n_outer_, "(" + lane_ + " + part * " + std::to_string(width_) + ")", std::to_string(width_ * split_), V,
                        pointwise_work(s));
      else
        emit_space_loop(b, "    ", s, n_outer_, lane_, std::to_string(width_), V, pointwise_work(s));
      b << "  }\n";
    } else {
      emit_reduction(b, s);
    }
    for (int w : stage_outputs(s)) written.insert(w);
  }
}

// Defines variables first..last-1 (extents from the kernel and stage) from a flat index.
void KernelWriter::define_vars(StrBuilder& b, const std::string& ind, const std::string& flat, int first, int last, const Stage* s) {
  int64_t inner_literal = 1;  // the product of the extents inside: literal and spelled factors
  std::string inner_symbolic;
  for (int v = last - 1; v >= first; --v) {
    const int64_t& n = v < n_outer_ ? k_.outer_sizes[v] : s->inner_sizes[v - n_outer_];
    std::string inner = std::to_string(inner_literal);
    if (!inner_symbolic.empty()) inner = inner_literal == 1 ? "(" + inner_symbolic + ")" : "(" + inner + "*" + inner_symbolic + ")";
    b << ind << "const " << IT_ << " x" << v << " = ";
    if (!is_symbolic(n) && n == 1) b << "0";
    else if (v == first) b << (inner == "1" ? flat : "(" + flat + ") / " + inner);
    else if (inner == "1") b << "(" << flat << ") % " << int_text(n);
    else b << "((" << flat << ") / " << inner << ") % " << int_text(n);
    b << ";\n";
    if (is_symbolic(n)) inner_symbolic += (inner_symbolic.empty() ? "" : "*") + int_text(n);
    else inner_literal *= n;
  }
}

// Elements a vector access of this stage covers (1: the stage runs element by element).
// Records the buffers that must be aligned.
int KernelWriter::stage_vector_width(const Stage& s, int first_var, int end_var) {
  if (!allow_vectors_ || end_var <= first_var) return 1;
  const int v = end_var - 1;
  const int64_t& extent = v < n_outer_ ? k_.outer_sizes[v] : s.inner_sizes[v - n_outer_];
  const bool symbolic = is_symbolic(extent);  // a runtime size: its tail code covers short rows
  if (!symbolic && extent < 2) return 1;
  for (int V : {8, 4, 2}) {
    std::set<int> bufs;
    bool store_ok = s.out_buffer >= 0 && element_size(p_.buffers[s.out_buffer].dtype) * V <= 16 && vector_access(s.out_index, v, V);
    if (s.kind == Stage::kPointwise && !store_ok) continue;
    if (store_ok) bufs.insert(s.out_buffer);
    for_each_node(s.value, [&](const Expr& e) {
      if (vector_load(p_, e, v, V)) bufs.insert(e.buffer);
    });
    if (bufs.empty() || (s.kind == Stage::kReduction && bufs.size() == (store_ok ? 1u : 0u))) continue;
    if (!symbolic && extent < V) continue;
    aligned_.insert(bufs.begin(), bufs.end());
    vector_width_ = std::max(vector_width_, V);
    return V;
  }
  return 1;
}

// A pointwise stage over channels-last activations reads per-channel vectors along its innermost
// variable: subexpressions that vary with that variable alone and cost several instructions per
// element (a batch norm's 1/sqrt(var + eps), computed for every element of every row) give the
// same values on every row. Each thread of the grid-stride loop keeps the same vector group of
// the row on every trip when the block size is a multiple of the groups per row, so those
// subexpressions are computed once per thread, before the loop, into a register array per lane,
// and the grid shrinks so that each thread makes several trips.
//
// That pays where a stage computes two or more such operations per element; with one it costs
// more than it saves (the prologue's loads come before the loop's, and fewer blocks keep fewer
// loads in flight). ResNet-50, batch 32, on an H200, kernel by kernel against not hoisting: the
// end of a downsampling block (two batch norms, add, relu; 308 MB moved) 100.4 -> 87.2 us, the
// stem's batch norm inlined at the nine positions of its max pool 44.4 -> 38.7 us, and the
// single batch norm + add + relu 152.4 -> 154.9 us over its two calls. Also measured: hoisting
// the per-channel loads too (mean, weight, bias) helped the two-norm kernels (81.2 us) and hurt
// every other one, 4 rather than 8 trips per thread gained nothing, and 2 lost. Returns whether
// anything was hoisted.
bool KernelWriter::hoist_channel_invariants(StrBuilder& b, const std::string& ind, const Stage& s, int V) {
  const int end_var = n_outer_ + static_cast<int>(s.inner_sizes.size());
  const int v = end_var - 1;
  if (s.kind != Stage::kPointwise || V < 2 || end_var < 2) return false;
  const int64_t& last = v < n_outer_ ? k_.outer_sizes[v] : s.inner_sizes[v - n_outer_];
  if (is_symbolic(last) || last % V != 0 || block_ % (last / V) != 0 || rows_ * product(s.inner_sizes) / last < 2) return false;
  auto invariant = [&](const ExprPtr& e) {  // varies with v alone: no other variable, local or gather
    bool ok = true;
    for_each_node(e, [&](const Expr& x) { ok = ok && x.kind != Expr::kLocal && x.indirect.empty(); });
    for (int u = 0; ok && u < end_var; ++u) ok = u == v || !expr_uses_var(e, u);
    return ok;
  };
  auto costly_ops = [](const ExprPtr& e) {  // nodes of operations flagged costly in the op table
    int n = 0;
    for_each_node(e, [&](const Expr& x) {
      n += (x.kind == Expr::kUnary && info(x.unary_op).costly()) || (x.kind == Expr::kBinary && info(x.binary_op).costly());
    });
    return n;
  };
  std::vector<ExprPtr> found;  // the largest such subexpressions
  std::set<const Expr*> seen;
  std::function<void(const ExprPtr&)> walk = [&](const ExprPtr& e) {
    if (!seen.insert(e.get()).second) return;
    if (costly_ops(e) > 0 && invariant(e)) {
      found.push_back(e);
      return;
    }
    for (const ExprPtr& a : e->args) walk(a);
  };
  walk(s.value);
  // Costly operations per element that hoisting removes (nodes, as the loop would compute them).
  int removed = 0;
  for (const ExprPtr& e : found) removed += costly_ops(e);
  if (removed < 2) return false;
  const std::string xv = "x" + std::to_string(v);
  b << ind << "const " << IT_ << " hb = (static_cast<" << IT_ << ">(threadIdx.x) % " << last / V << ") * " << V << ";\n";
  // One array per distinct value (a max pool's window inlines its input's batch norm once per
  // position: the same per-channel value, nine times).
  std::vector<std::pair<ExprPtr, std::string>> arrays;
  for (const ExprPtr& e : found) {
    auto same = std::find_if(arrays.begin(), arrays.end(), [&](const auto& a) { return same_expr(a.first, e); });
    if (same == arrays.end()) {
      arrays.emplace_back(e, "h" + std::to_string(counter_++));
      b << ind << temp_type(e->dtype) << " " << arrays.back().second << "[" << V << "];\n";
      same = arrays.end() - 1;
    }
    hoisted_[e.get()] = same->second;
  }
  b << ind << "#pragma unroll\n" << ind << "for (int k = 0; k < " << V << "; ++k) {\n";
  b << ind << "  const " << IT_ << " " << xv << " = hb + k;\n";
  ExprEmitter em(p_, b, ind + "  ", counter_);
  for (const auto& [e, name] : arrays) {
    const std::string value = em.emit(e);
    b << ind << "  " << name << "[k] = " << value << ";\n";
  }
  b << ind << "}\n";
  return true;
}

ElementWork KernelWriter::pointwise_work(const Stage& s) {
  ElementWork w;
  const Program& p = p_;
  w.body = [&p, &s](ExprEmitter& em, StrBuilder& b, const std::string& ind, bool vector_store) {
    std::string v = em.emit(s.value);
    if (vector_store) return v;
    b << ind << store(p, s.out_buffer, index_text(s.out_index), v) << "\n";
    return std::string();
  };
  return w;
}

// A loop over the stage's space (variables first_var.. end, the outer ones already defined
// when first_var > 0): flat positions start, start+step, ... each one element, or with V > 1
// one group of V consecutive elements of the innermost variable (vector loads/stores where
// the access allows, element by element for the last partial group of a row).
void KernelWriter::emit_space_loop(StrBuilder& b, const std::string& ind, const Stage& s, int first_var, const std::string& start,
                     const std::string& step, int V, const ElementWork& work) {
  const int end_var = n_outer_ + static_cast<int>(s.inner_sizes.size());
  std::vector<const int64_t*> extents;  // the program's fields (runtime sizes spell them)
  for (int v = first_var; v < end_var; ++v) extents.push_back(v < n_outer_ ? &k_.outer_sizes[v] : &s.inner_sizes[v - n_outer_]);
  int64_t n = 1;
  for (const int64_t* e : extents) n *= *e;
  if (V == 1) {
    b << ind << "for (" << IT_ << " i = " << start << "; i < " << product_text(extents) << "; i += " << step << ") {\n";
    define_vars(b, ind + "  ", "i", first_var, end_var, &s);
    ExprEmitter em(p_, b, ind + "  ", counter_);
    work.body(em, b, ind + "  ", false);
    b << ind << "}\n";
    return;
  }
  const int v = end_var - 1;
  const int64_t& last = *extents.back();
  const int64_t groups = n / last * ((last + V - 1) / V);
  // Groups per row and in all, as C++.
  const std::string groups_per_row =
      is_symbolic(last) ? "((" + int_text(last) + " + " + std::to_string(V - 1) + ") / " + std::to_string(V) + ")" : std::to_string((last + V - 1) / V);
  extents.pop_back();
  const std::string rows = product_text(extents);
  std::string groups_text = std::to_string(groups);
  if (is_symbolic(last) || rows.front() == '(') groups_text = rows == "1" ? groups_per_row : "(" + rows + "*" + groups_per_row + ")";
  const std::string xv = "x" + std::to_string(v);
  // A row stage with cached loads: the group loop unrolled, group j of the thread at g.
  const bool row_loop = first_var == n_outer_ && start == lane_ && step == std::to_string(width_);
  const int G = (!cache_.empty() || !values_.empty()) && row_loop ? cache_groups(s, V) : 0;
  bool cached = G && uses_values(s, V, G);
  if (G) {
    for_each_node(s.value, [&](const Expr& e) {
      if (e.kind == Expr::kLoad && e.indirect.empty() && cache_.count(load_key(s, e, V, G))) cached = true;
    });
  }
  if (cached) {
    // A runtime length: every group guarded, and the kernel's cached body runs only where the
    // row's groups are at most G per thread.
    if (is_symbolic(last)) fits_.insert(groups_text + " <= " + std::to_string(static_cast<int64_t>(G) * width_));
    for (int j = 0; j < G; ++j) {
      b << ind << "{\n" << ind << "  const " << IT_ << " g = " << start << " + " << j * width_ << ";\n";
      const bool guard = is_symbolic(last) || (j + 1) * static_cast<int64_t>(width_) > groups;
      b << ind << "  " << (guard ? "if (g < " + (is_symbolic(last) ? groups_text : std::to_string(groups)) + ") {" : "{") << "\n";
      emit_group(b, ind + "    ", s, first_var, end_var, V, work, groups_per_row, last, xv, j, G);
      b << ind << "  }\n" << ind << "}\n";
    }
    for (auto& [key, c] : cache_)
      if (!c.first) {
        bool used = false;
        for_each_node(s.value, [&](const Expr& e) {
          if (e.kind == Expr::kLoad && e.indirect.empty() && load_key(s, e, V, G) == key) used = true;
        });
        if (used) c.first = &s;
      }
    return;
  }
  b << ind << "for (" << IT_ << " g = " << start << "; g < " << groups_text << "; g += " << step << ") {\n";
  emit_group(b, ind + "  ", s, first_var, end_var, V, work, groups_per_row, last, xv, -1, 0);
  b << ind << "}\n";
}

// One vector group of a stage's loop at flat group position `g` (defined by the caller):
// j >= 0 is the thread's group number in a cached (unrolled) loop of G groups.
void KernelWriter::emit_group(StrBuilder& b, const std::string& in, const Stage& s, int first_var, int end_var, int V, const ElementWork& work,
                const std::string& groups_per_row, const int64_t& last, const std::string& xv, int j, int G) {
  const int v = end_var - 1;
  if (end_var - 1 > first_var) define_vars(b, in, "g / " + groups_per_row, first_var, end_var - 1, &s);
  // With one variable the loop's space is one row of groups (g < groups_per_row): a remainder
  // there is a division the compiler cannot drop (it does not know the bound of threadIdx.x),
  // and it kept a row kernel's group addresses from being one base plus constant offsets
  // (pointwise_ln on an H200: 54 -> 48 registers, 5 blocks per SM instead of 4, 91.3 -> 78.1 us).
  const std::string group = end_var - 1 > first_var ? "(g % " + groups_per_row + ")" : "g";
  b << in << "const " << IT_ << " base = " << group << " * " << V << ";\n";
  const bool tail = is_symbolic(last) || last % V != 0;  // a runtime length may leave a partial group
  std::string vin = in;
  if (tail) {
    b << in << "if (base + " << V << " <= " << int_text(last) << ") {\n";
    vin = in + "  ";
  }
  // Vector loads, at lane 0 of the group.
  ExprEmitter em(p_, b, vin + "  ", counter_);
  em.lane = "k";
  std::set<std::string> seen_loads;
  StrBuilder loads;
  std::map<std::string, std::string> load_names;
  // Tensor-valued indices of vector loads are computed in the load block (at lane 0 of the group).
  ExprEmitter lem(p_, loads, vin + "  ", counter_);
  // Subexpressions an earlier stage left in the row value cache: read from registers, their
  // loads not made.
  std::set<const Expr*> from_cache;
  if (j >= 0)
    for (const CachedValue& c : values_) {
      if (c.V != V || c.G != G || std::find(c.consumers.begin(), c.consumers.end(), &s) == c.consumers.end()) continue;
      for (const Expr* e : value_matches(s.value, c.value)) {
        em.values[e] = c.name + "[" + std::to_string(j) + "][k]";
        from_cache.insert(e);
      }
    }
  for (const auto& [e, name] : hoisted_) {
    em.values[e] = name + "[k]";
    from_cache.insert(e);
  }
  for_each_node_outside(s.value, from_cache, [&](const Expr& e) {
    if (e.kind != Expr::kLoad || !aligned_.count(e.buffer) || !vector_load(p_, e, v, V)) return;
    std::string key = "b" + std::to_string(e.buffer) + " + (" + index_text(e.index) + ")";
    if (!e.indirect.empty()) {
      key = "b" + std::to_string(e.buffer) + " + (" + lem.address(e) + ")";
    }
    if (j >= 0 && e.indirect.empty()) {
      if (auto c = cache_.find(load_key(s, e, V, G)); c != cache_.end()) {
        const std::string slot = c->second.name + "[" + std::to_string(j) + "]";
        if (!c->second.prefetched && (!c->second.first || c->second.first == &s) && !load_names.count(key))
          loads << vin << "  " << slot << " = kiln::load_vec<" << V << ">(" << key << ");\n";
        load_names.emplace(key, slot);
        em.vec_loads[&e] = slot;
        return;
      }
    }
    auto it = load_names.find(key);
    if (it == load_names.end()) {
      std::string nm = "vl" + std::to_string(counter_++);
      b << vin << "kiln::Vec<" << cuda_ctype(p_.buffers[e.buffer].dtype) << ", " << V << "> " << nm << ";\n";
      loads << vin << "  " << nm << " = kiln::load_vec<" << V << ">(" << key << ");\n";
      it = load_names.emplace(key, nm).first;
    }
    em.vec_loads[&e] = it->second;
  });
  if (!loads.str().empty()) b << vin << "{\n" << vin << "  const " << IT_ << " " << xv << " = base;\n" << loads.str() << vin << "}\n";
  const bool vstore = s.kind == Stage::kPointwise && aligned_.count(s.out_buffer) &&
                      element_size(p_.buffers[s.out_buffer].dtype) * V <= 16 && vector_access(s.out_index, v, V);
  const std::string ctype = s.out_buffer >= 0 ? cuda_ctype(p_.buffers[s.out_buffer].dtype) : "";
  if (vstore) b << vin << "kiln::Vec<" << ctype << ", " << V << "> vs;\n";
  if (work.before_group) work.before_group(b, vin, V);
  b << vin << "#pragma unroll\n" << vin << "for (int k = 0; k < " << V << "; ++k) {\n";
  b << vin << "  const " << IT_ << " " << xv << " = base + k;\n";
  std::string val = work.body(em, b, vin + "  ", vstore);
  if (vstore) b << vin << "  vs.v[k] = " << to_storage(p_.buffers[s.out_buffer].dtype, val) << ";\n";
  if (j >= 0)
    for (const CachedValue& c : values_)
      if (c.producer == &s && c.V == V && c.G == G) b << vin << "  " << c.name << "[" << j << "][k] = " << em.emit(s.value) << ";\n";
  b << vin << "}\n";
  if (work.after_group) work.after_group(b, vin, V);
  if (vstore) {
    b << vin << "{\n" << vin << "  const " << IT_ << " " << xv << " = base;\n";
    b << vin << "  kiln::store_vec<" << V << ">(b" << s.out_buffer << " + (" << index_text(s.out_index) << "), vs);\n" << vin << "}\n";
  }
  if (tail) {
    b << in << "} else {\n";
    b << in << "  for (" << IT_ << " " << xv << " = base; " << xv << " < " << int_text(last) << "; ++" << xv << ") {\n";
    ExprEmitter sem(p_, b, in + "    ", counter_);
    work.body(sem, b, in + "    ", false);
    b << in << "  }\n" << in << "}\n";
  }
}

std::string KernelWriter::identity(ReduceOp op, DType t) {
  switch (info(op).identity) {
    case ReduceIdentity::kOne: return literal(1, t);
    case ReduceIdentity::kLowest: return is_floating(t) ? literal(-INFINITY, t) : integer_limit(t, false, temp_type(t));
    case ReduceIdentity::kHighest: return is_floating(t) ? literal(INFINITY, t) : integer_limit(t, true, temp_type(t));
    default: return literal(0, t);
  }
}

}  // namespace kiln::codegen::cuda
