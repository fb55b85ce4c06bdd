// Renders loop-IR kernels to CUDA C++; see cuda_codegen.h.
#include "codegen/cuda/cuda_codegen.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "codegen/common/op_spelling.h"
#include "codegen/cuda/cuda_expr.h"
#include "support/str_builder.h"

namespace kiln::codegen {
using namespace ir;
using support::StrBuilder;

std::string cuda_prefix_header() {
  static const char* text =
#include "kiln_cuda_prefix.inc"
      ;
  return text;
}

namespace {
using namespace cuda;

// ---- kernels -------------------------------------------------------------------------------

enum class Strategy { kPointwise, kRowPerThread, kRowPerWarp, kRowPerBlock };
const char* strategy_name(Strategy s) {
  switch (s) {
    case Strategy::kPointwise: return "pointwise";
    case Strategy::kRowPerThread: return "row_per_thread";
    case Strategy::kRowPerWarp: return "row_per_warp";
    default: return "row_per_block";
  }
}

// What one thread does per element of a stage's space (the variables are defined).
struct ElementWork {
  // Emits the work for one element at `ind`; `lane` is set when a vector group is being
  // processed (the element's lane within it), and the returned string is then the value to put
  // into the vector store (empty: nothing to store by vector).
  std::function<std::string(ExprEmitter&, StrBuilder&, const std::string& ind, bool vector_store)> body;
  // Optional, around the unrolled element loop of a vector group of V (the body then runs with
  // the emitter's lane set): what goes before it and after it.
  std::function<void(StrBuilder&, const std::string& ind, int V)> before_group, after_group;
};

class KernelWriter {
 public:
  KernelWriter(const Program& p, const Kernel& k, bool allow_vectors, const CudaConfig& config = {}, int symbols = 0)
      : p_(p), k_(k), allow_vectors_(allow_vectors && config.vectors), config_(config), n_outer_(static_cast<int>(k.outer_sizes.size())),
        symbols_(symbols) {}

  CudaKernel write(StrBuilder& b, const std::string& name) {
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

 private:
  void choose_strategy() {
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
  int row_split() const {
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

  void emit_body(StrBuilder& b) {
    if (strategy_ == Strategy::kPointwise) {
      int64_t work = 1;
      for (const Stage& s : k_.stages) {
        const int64_t n = rows_ * product(s.inner_sizes);
        int V = stage_vector_width(s, 0, n_outer_ + static_cast<int>(s.inner_sizes.size()));
        work = std::max(work, (n + V - 1) / V);
        b << "  {  // stage: " << (s.out_buffer >= 0 ? "buf" + std::to_string(s.out_buffer) : std::string("?")) << "\n";
        std::string start = "static_cast<" + IT_ + ">(blockIdx.x) * blockDim.x + threadIdx.x";
        std::string step = "static_cast<" + IT_ + ">(gridDim.x) * blockDim.x";
        emit_space_loop(b, "    ", s, 0, start, step, V, pointwise_work(s));
        b << "  }\n";
      }
      const int64_t blocks = std::min<int64_t>(kMaxGrid, std::max<int64_t>(1, (work + block_ - 1) / block_));
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

  // Rows of a block (over 1024 elements) keep the load cache off by default unless the value
  // cache holds values of the row: a block's row stays in L2 between stages, and the registers
  // cost occupancy (pointwise_ln, 4096 floats a row, on an H100 before the value cache: 0.19 ms
  // with the load cache, 0.155 without). Autotuning still tries it (an explicit row_per_block
  // configuration), and 'nocache' turns both caches off.
  // The row value cache (plan_value_cache) is on for every row strategy: it saves arithmetic
  // as well as memory traffic. Where it holds values, the loads of their stages are cached too,
  // so that a row block's loads are all issued at the kernel's start.
  void plan_caches(StrBuilder& b) {
    plan_value_cache(b);
    const bool cache = strategy_ != Strategy::kRowPerBlock || config_.strategy >= 0 || !values_.empty();
    if (cache) plan_row_cache(b);
  }

  // Groups per thread for the cache of a row stage whose length is a runtime size: as many as the
  // register budget holds, by what the caches cost per group (0: none would be cached). dyn_seq's
  // masked softmax (bf16 scores, groups of 8, a row per warp) keeps its scores and two row values
  // in 80 bytes a group: 3 groups, rows up to 768.
  int symbolic_row_groups() {
    bool any = false;
    for (const Stage& s : k_.stages)
      any = any || (s.inner_sizes.size() == 1 && is_symbolic(s.inner_sizes[0]) &&
                    stage_vector_width(s, n_outer_, n_outer_ + 1) > 1);
    if (!any) return 0;
    symbolic_groups_ = 1;
    StrBuilder scratch;
    plan_caches(scratch);
    const int per_group = std::max(cache_bytes_, value_bytes_);
    clear_cache_plan();
    fits_.clear();
    return per_group > 0 ? std::min(kMaxCacheGroups, kMaxCacheBytes / per_group) : 0;
  }

  // Forgets the planned load and value caches (a body is planned again without them).
  void clear_cache_plan() {
    cache_.clear();
    values_.clear();
    value_bytes_ = 0;
    cache_bytes_ = 0;
  }

  static std::string indented(const std::string& text) {
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

  void emit_stages(StrBuilder& b) {
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

  // Row kernels read a row in several stages (softmax: max, sum, then the output; layer norm:
  // statistics, then the normalized row), each stage re-reading it from memory. Where a thread's
  // share of the row is a few vector groups, a vector load that two stages make at the same
  // index is made once into registers (an array indexed by the group, with the group loop
  // unrolled) and later stages read the registers: one pass over memory instead of two or three.
  struct CachedLoad {
    std::string name;        // the register array, one Vec per group of the thread
    const Stage* first = nullptr;  // the stage that loads it
    // Prefetched: loaded at the kernel's start (emit_prefetch), not by a stage.
    bool prefetched = false;
    const Stage* stage = nullptr;  // a stage that reads it (its loop defines the index's variables)
    const Expr* load = nullptr;
    int V = 1, G = 0;
  };
  // A launch of at most this many blocks leaves most of the GPU idle (batch-1 decoding: 32 rows of
  // a layer norm are 4 blocks): its time is latency, not bandwidth, and registers cost nothing.
  // There the loads that are the same for every row (a layer norm's weight and bias), which the
  // later stages read after the row's reduction, are issued at the kernel's start with the row's
  // own loads instead of after the reduction: one memory round trip rather than two.
  static constexpr unsigned kLatencyBoundGrid = 128;
  static constexpr int kMaxCacheGroups = 8;      // groups per thread
  static constexpr int kMaxCacheBytes = 256;     // registers per thread spent on cached rows

  // Groups per thread of a row stage's vector loop, or 0 where it does not qualify (tails,
  // element-wise stages, more groups than kMaxCacheGroups).
  // A row of a runtime length (one inner variable) gets symbolic_groups_, guarded per group.
  int cache_groups(const Stage& s, int V) const {
    if (V <= 1 || s.inner_sizes.empty()) return 0;
    if (any_symbolic(s.inner_sizes)) return s.inner_sizes.size() == 1 ? symbolic_groups_ : 0;
    const int64_t last = s.inner_sizes.back();
    if (last % V != 0) return 0;
    const int64_t groups = product(s.inner_sizes) / V;
    const int64_t g = (groups + width_ - 1) / width_;
    return g <= kMaxCacheGroups ? static_cast<int>(g) : 0;
  }
  // A load's identity across stages: the same index string means the same element only where
  // the stages' loops (inner sizes, vector width) are the same.
  std::string load_key(const Stage& s, const Expr& e, int V, int G) const {
    std::string key = "b" + std::to_string(e.buffer) + " + (" + index_text(e.index) + ")|" + std::to_string(V) + "|" + std::to_string(G) + "|";
    for (int64_t n : s.inner_sizes) key += std::to_string(n) + ",";
    return key;
  }
  // Row value cache. A reduction folds a value computed from the row (layer norm: the statistics
  // of gelu(x * w + b) + x) that a later stage computes again (the normalized output of that same
  // value): the later stage re-read the row and redid the arithmetic (pointwise_ln on an H200:
  // erf twice per element, 130 us for 268 MB, half the copy rate; with this cache 103 us, 66% of
  // a 3.92 TB/s copy, and 92.5 us with 128-thread blocks, which max-autotune picks; softmax of
  // 8192-float rows 79 -> 68 us, the copy's rate). Where both stages walk the
  // same space with the same vector groups and a thread's share of the row is a few groups, the
  // folded values are kept in registers (one array element per group and lane, the group loops
  // unrolled) and the later stage reads them in place of the whole subexpression.
  struct CachedValue {
    std::string name;        // the register array [G][V]
    const Stage* producer = nullptr;
    ExprPtr value;
    int V = 1, G = 0;
    std::vector<const Stage*> consumers;
  };
  std::vector<CachedValue> values_;
  int value_bytes_ = 0;  // registers (bytes per thread) the value cache takes from kMaxCacheBytes

  // The nodes of `root` that compute `v` (outermost ones; each node once).
  static std::vector<const Expr*> value_matches(const ExprPtr& root, const ExprPtr& v) {
    std::vector<const Expr*> out;
    std::set<const Expr*> seen;
    std::function<void(const ExprPtr&)> walk = [&](const ExprPtr& e) {
      if (!seen.insert(e.get()).second) return;
      if (e->kind == v->kind && e->dtype == v->dtype && same_expr(e, v)) {
        out.push_back(e.get());
        return;
      }
      for (const ExprPtr& a : e->args) walk(a);
      for (const auto& ind : e->indirect) walk(ind.value);
    };
    walk(root);
    return out;
  }
  // Visits the nodes of `root` outside the subtrees rooted at `skip` (a node shared with a
  // path around them is still visited).
  static void for_each_node_outside(const ExprPtr& root, const std::set<const Expr*>& skip, const std::function<void(const Expr&)>& f) {
    std::set<const Expr*> seen;
    std::function<void(const ExprPtr&)> walk = [&](const ExprPtr& e) {
      if (skip.count(e.get()) || !seen.insert(e.get()).second) return;
      f(*e);
      for (const ExprPtr& a : e->args) walk(a);
      for (const auto& ind : e->indirect) walk(ind.value);
    };
    walk(root);
  }
  void plan_value_cache(StrBuilder& b) {
    std::set<int> written;
    for (const Stage& s : k_.stages)
      for (int w : stage_outputs(s)) written.insert(w);
    for (size_t i = 0; i < k_.stages.size(); ++i) {
      const Stage& s = k_.stages[i];
      if (s.kind != Stage::kReduction || !s.value) continue;
      // A plain load is the load cache's (plan_row_cache); constants and locals cost nothing.
      const Expr::Kind kind = s.value->kind;
      if (kind == Expr::kLoad || kind == Expr::kConst || kind == Expr::kLocal || kind == Expr::kIndexValue) continue;
      // (mean/var from cached values, emit_two_pass_moments, divides by a literal length.)
      if (s.reduce == ReduceOp::kWelford && any_symbolic(s.inner_sizes)) continue;
      const int end = n_outer_ + static_cast<int>(s.inner_sizes.size());
      const int V = stage_vector_width(s, n_outer_, end);
      const int G = cache_groups(s, V);
      if (!G) continue;
      bool reads_written = false;
      for_each_node(s.value, [&](const Expr& e) {
        if (e.kind == Expr::kLoad && written.count(e.buffer)) reads_written = true;
      });
      if (reads_written) continue;
      bool seen_before = false;
      for (const CachedValue& c : values_) seen_before = seen_before || same_expr(c.value, s.value);
      if (seen_before) continue;
      CachedValue c;
      c.producer = &s;
      c.value = s.value;
      c.V = V;
      c.G = G;
      for (size_t t = i + 1; t < k_.stages.size(); ++t) {
        const Stage& u = k_.stages[t];
        if (u.inner_sizes != s.inner_sizes || !u.value) continue;
        if (stage_vector_width(u, n_outer_, end) != V || cache_groups(u, V) != G) continue;
        if (!value_matches(u.value, s.value).empty()) c.consumers.push_back(&u);
      }
      if (c.consumers.empty()) continue;
      const int size = (is_half(s.value->dtype) ? 4 : static_cast<int>(element_size(s.value->dtype))) * V * G;
      if (value_bytes_ + size > kMaxCacheBytes) continue;
      value_bytes_ += size;
      c.name = "vc" + std::to_string(values_.size());
      b << "  " << temp_type(s.value->dtype) << " " << c.name << "[" << G << "][" << V << "];  // row values (r" << s.local << "'s folded values)\n";
      values_.push_back(std::move(c));
    }
  }
  // Whether a stage's group loop (V, G) produces or reads a cached value.
  bool uses_values(const Stage& s, int V, int G) const {
    for (const CachedValue& c : values_) {
      if (c.V != V || c.G != G) continue;
      if (c.producer == &s || std::find(c.consumers.begin(), c.consumers.end(), &s) != c.consumers.end()) return true;
    }
    return false;
  }

  // Which loads to cache; declares their register arrays.
  void plan_row_cache(StrBuilder& b) {
    const bool latency_bound = launch_.grid <= kLatencyBoundGrid && !any_symbolic(k_.outer_sizes);
    std::map<std::string, std::tuple<const Stage*, const Expr*, int, int>> invariant;
    std::vector<std::string> invariant_order;
    std::set<int> written;
    for (const Stage& s : k_.stages)
      for (int w : stage_outputs(s)) written.insert(w);
    std::map<std::string, int> stages_using;
    std::map<std::string, const Expr*> example;
    std::map<std::string, const Stage*> example_stage;
    std::vector<std::string> order;
    for (const Stage& s : k_.stages) {
      const int end = n_outer_ + static_cast<int>(s.inner_sizes.size());
      const int V = stage_vector_width(s, n_outer_, end);
      const int G = cache_groups(s, V);
      if (!G) continue;
      std::set<std::string> keys;
      for_each_node(s.value, [&](const Expr& e) {
        if (e.kind != Expr::kLoad || !e.indirect.empty() || written.count(e.buffer) || !aligned_.count(e.buffer)) return;
        if (element_size(p_.buffers[e.buffer].dtype) * V > 16 || !vector_access(e.index, end - 1, V)) return;
        // Loads the same for every row (a layer norm's weight and bias) stay in L1/L2 anyway:
        // registers spent on them cost occupancy (pointwise_ln on an H100: 0.19 ms cached, 0.15 not).
        bool per_row = false;
        for (int v = 0; v < n_outer_; ++v) per_row = per_row || e.index.uses_var(v);
        if (!per_row) {
          if (latency_bound) {
            std::string key = load_key(s, e, V, G);
            if (!invariant.count(key)) invariant_order.push_back(key);
            invariant.emplace(key, std::make_tuple(&s, &e, V, G));
          }
          return;
        }
        std::string key = load_key(s, e, V, G);
        if (keys.insert(key).second && !stages_using.count(key)) {
          order.push_back(key);
          example[key] = &e;
          example_stage[key] = &s;
        }
      });
      for (const std::string& k : keys) ++stages_using[k];
    }
    int bytes = value_bytes_;
    for (const std::string& key : order) {
      if (stages_using[key] < 2) continue;
      const Expr& e = *example[key];
      const size_t bar1 = key.find('|'), bar2 = key.find('|', bar1 + 1), bar3 = key.find('|', bar2 + 1);
      const int V = std::stoi(key.substr(bar1 + 1, bar2 - bar1 - 1)), G = std::stoi(key.substr(bar2 + 1, bar3 - bar2 - 1));
      const int size = static_cast<int>(element_size(p_.buffers[e.buffer].dtype)) * V * G;
      if (bytes + size > kMaxCacheBytes) continue;
      bytes += size;
      CachedLoad c;
      c.name = "rc" + std::to_string(cache_.size());
      // Loaded at the kernel's start, every group at once: loaded by the group loop instead, a
      // group's loads waited for the previous group's fold (a branch the compiler does not
      // move loads across), one memory round trip per group.
      c.prefetched = true;
      c.stage = example_stage[key];
      c.load = &e;
      c.V = V;
      c.G = G;
      b << "  kiln::Vec<" << cuda_ctype(p_.buffers[e.buffer].dtype) << ", " << V << "> " << c.name << "[" << G << "];  // row cache\n";
      cache_[key] = c;
    }
    for (const std::string& key : invariant_order) {
      if (cache_.count(key)) continue;
      auto [st, e, V, G] = invariant.at(key);
      const int size = static_cast<int>(element_size(p_.buffers[e->buffer].dtype)) * V * G;
      if (bytes + size > kMaxCacheBytes) continue;
      bytes += size;
      CachedLoad c;
      c.name = "rc" + std::to_string(cache_.size());
      c.prefetched = true;
      c.stage = st;
      c.load = e;
      c.V = V;
      c.G = G;
      b << "  kiln::Vec<" << cuda_ctype(p_.buffers[e->buffer].dtype) << ", " << V << "> " << c.name << "[" << G << "];  // prefetched\n";
      cache_[key] = c;
    }
    cache_bytes_ = bytes;
    emit_prefetch(b);
  }
  // The prefetched loads, group by group, as the reading stage's unrolled loop addresses them.
  void emit_prefetch(StrBuilder& b) {
    for (const auto& [key, c] : cache_) {
      if (!c.prefetched) continue;
      const Stage& s = *c.stage;
      const int end_var = n_outer_ + static_cast<int>(s.inner_sizes.size());
      if (is_symbolic(s.inner_sizes.back())) {
        // A runtime length (one inner variable): the full groups of the row; a partial last
        // group is read element by element by the stages' tail code.
        const std::string full = "(" + int_text(s.inner_sizes.back()) + " / " + std::to_string(c.V) + ")";
        for (int j = 0; j < c.G; ++j) {
          b << "  {\n    const " << IT_ << " g = " << lane_ << " + " << j * width_ << ";\n";
          b << "    if (g < " << full << ") {\n";
          b << "      const " << IT_ << " x" << end_var - 1 << " = g * " << c.V << ";\n";
          b << "      " << c.name << "[" << j << "] = kiln::load_vec<" << c.V << ">(b" << c.load->buffer << " + (" << index_text(c.load->index)
            << "));\n";
          b << "    }\n  }\n";
        }
        continue;
      }
      const int64_t last = s.inner_sizes.back();
      const int64_t groups_per_row = last / c.V;
      const int64_t groups = product(s.inner_sizes) / c.V;
      for (int j = 0; j < c.G; ++j) {
        b << "  {\n    const " << IT_ << " g = " << lane_ << " + " << j * width_ << ";\n";
        const bool guard = (j + 1) * static_cast<int64_t>(width_) > groups;
        b << "    " << (guard ? "if (g < " + std::to_string(groups) + ") {" : "{") << "\n";
        if (end_var - 1 > n_outer_) define_vars(b, "      ", "g / " + std::to_string(groups_per_row), n_outer_, end_var - 1, &s);
        // (One inner variable: g < groups_per_row, no remainder to take.)
        const std::string group = end_var - 1 > n_outer_ ? "(g % " + std::to_string(groups_per_row) + ")" : "g";
        b << "      const " << IT_ << " x" << end_var - 1 << " = " << group << " * " << c.V << ";\n";
        b << "      " << c.name << "[" << j << "] = kiln::load_vec<" << c.V << ">(b" << c.load->buffer << " + (" << index_text(c.load->index)
          << "));\n";
        b << "    }\n  }\n";
      }
    }
  }
  std::map<std::string, CachedLoad> cache_;
  int cache_bytes_ = 0;       // registers (bytes per thread) the planned caches take
  int symbolic_groups_ = 0;   // cache groups per thread of a row of a runtime length
  std::set<std::string> fits_;  // conditions under which the cached body's rows fit its groups

  // Defines variables first..last-1 (extents from the kernel and stage) from a flat index.
  void define_vars(StrBuilder& b, const std::string& ind, const std::string& flat, int first, int last, const Stage* s = nullptr) {
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
  int stage_vector_width(const Stage& s, int first_var, int end_var) {
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

  ElementWork pointwise_work(const Stage& s) {
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
  void emit_space_loop(StrBuilder& b, const std::string& ind, const Stage& s, int first_var, const std::string& start,
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
  void emit_group(StrBuilder& b, const std::string& in, const Stage& s, int first_var, int end_var, int V, const ElementWork& work,
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

  // The row value cache entry that holds every value a reduction stage folds (this thread's
  // share of the row, in registers once its loop is done), or nullptr.
  const CachedValue* folded_values(const Stage& s) {
    if (s.inner_sizes.empty()) return nullptr;
    const int V = stage_vector_width(s, n_outer_, n_outer_ + static_cast<int>(s.inner_sizes.size()));
    for (const CachedValue& c : values_)
      if (c.producer == &s && c.V == V && c.G == cache_groups(s, V)) return &c;
    return nullptr;
  }

  // Combines every thread's `v` of the row (all threads end with the result).
  void emit_allreduce(StrBuilder& b, const std::string& v, const std::string& combine) {
    if (strategy_ == Strategy::kRowPerWarp) {
      b << "    " << v << " = kiln::warp_allreduce(" << v << ", " << combine << ");\n";
    } else if (strategy_ == Strategy::kRowPerBlock) {
      b << "    " << v << " = kiln::block_allreduce<" << (block_ + 31) / 32 << ">(" << v << ", " << combine << ", smem);\n";
    }
  }

  // mean/var of a row whose folded values the value cache holds (layer norm): two passes over the
  // registers, a sum for the mean and then the squared deviations from it, each reduced across the
  // row's threads with plain additions. Welford states cost a division per combine, and the row's
  // fold is a chain of them (pointwise_ln's kernel for sm_90: 1209 instructions per thread for its
  // 16 elements with Welford states, 780 with the two passes; on an H200 104.8 -> 91.3 us, timed
  // by scripts/gpu_ln_variants.py); the two passes are also the more accurate form.
  void emit_two_pass_moments(StrBuilder& b, const Stage& s, const CachedValue& c) {
    const std::string T = temp_type(s.acc_dtype);
    const std::string r = "r" + std::to_string(s.local);
    const int64_t n = product(s.inner_sizes);
    b << "  " << T << " " << r << "_0; " << T << " " << r << "_1;\n";
    b << "  {  // mean and squared deviations, two passes over the row values\n";
    b << "    " << T << " acc = " << T << "(0);\n";
    ElementWork w;
    const Program& p = p_;
    w.body = [&](ExprEmitter& em, StrBuilder& out, const std::string& ind, bool) {
      std::string v = em.emit(s.value);
      if (s.out_buffer >= 0) out << ind << store(p, s.out_buffer, index_text(s.out_index), v) << "\n";
      out << ind << "acc += " << v << ";\n";
      return std::string();
    };
    const int V = c.V;
    emit_space_loop(b, "    ", s, n_outer_, lane_, std::to_string(width_), V, w);
    const std::string add = "[](" + T + " a, " + T + " b) { return a + b; }";
    if (strategy_ == Strategy::kRowPerBlock) b << "    __shared__ " << T << " smem[32];\n";
    emit_allreduce(b, "acc", add);
    b << "    const " << T << " mean = acc / " << T << "(" << n << ");\n";
    b << "    " << T << " m2 = " << T << "(0);\n";
    const int64_t groups = n / V;
    for (int j = 0; j < c.G; ++j) {
      const bool guard = (j + 1) * static_cast<int64_t>(width_) > groups;
      b << "    " << (guard ? "if (" + lane_ + " + " + std::to_string(j * width_) + " < " + std::to_string(groups) + ") {" : "{") << "\n";
      b << "      #pragma unroll\n      for (int k = 0; k < " << V << "; ++k) {\n";
      b << "        const " << T << " d = " << c.name << "[" << j << "][k] - mean;\n";
      b << "        m2 += d * d;\n      }\n    }\n";
    }
    emit_allreduce(b, "m2", add);
    b << "    " << r << "_0 = mean; " << r << "_1 = m2;\n";
    b << "  }\n";
    emit_reduction_stores(b, s);
  }

  void emit_reduction_stores(StrBuilder& b, const Stage& s) {
    const std::string r = "r" + std::to_string(s.local);
    bool any_store = false;
    for (int sb : s.store_buffers) any_store = any_store || sb >= 0;
    if (any_store) {
      b << "  if (" << lane_ << " == 0) {\n";
      for (size_t part = 0; part < s.store_buffers.size(); ++part)
        if (s.store_buffers[part] >= 0)
          b << "    " << store(p_, s.store_buffers[part], index_text(s.store_index[part]), r + "_" + std::to_string(part)) << "\n";
      b << "  }\n";
    }
  }

  void emit_reduction(StrBuilder& b, const Stage& s) {
    const ReduceOp op = s.reduce;
    const std::string T = temp_type(s.acc_dtype);
    const std::string r = "r" + std::to_string(s.local);
    const bool welford = op == ReduceOp::kWelford;
    if (welford && is_floating(s.acc_dtype)) {
      if (const CachedValue* c = folded_values(s)) return emit_two_pass_moments(b, s, *c);
    }
    const bool arg = op == ReduceOp::kArgMax || op == ReduceOp::kArgMin;
    const std::string max_flag = op == ReduceOp::kArgMax ? "true" : "false";
    std::string state = welford ? "kiln::WelfordState<" + T + ">" : arg ? "kiln::ArgState<" + T + ">" : T;
    if (welford || arg) b << "  " << T << " " << r << "_0; " << (arg ? "long long " : T + " ") << r << "_1;\n";
    else b << "  " << T << " " << r << "_0;\n";
    b << "  {\n";
    if (welford) b << "    " << state << " acc = {" << T << "(0), " << T << "(0), " << T << "(0)};\n";
    else if (arg) b << "    " << state << " acc = {" << literal(0, s.acc_dtype) << ", -1};\n";
    else b << "    " << state << " acc = " << identity(op, s.acc_dtype) << ";\n";
    // Position within the reduced range (row-major over the inner variables), for argmax.
    std::string position = "0";
    for (size_t j = 0; j < s.inner_sizes.size(); ++j) {
      std::string x = "static_cast<long long>(x" + std::to_string(n_outer_ + static_cast<int>(j)) + ")";
      position = j ? "(" + position + ") * " + int_text(s.inner_sizes[j]) + " + " + x : x;
    }
    ElementWork w;
    const Program& p = p_;
    w.body = [&, welford, arg, position](ExprEmitter& em, StrBuilder& out, const std::string& ind, bool) {
      std::string v = em.emit(s.value);
      if (s.out_buffer >= 0) out << ind << store(p, s.out_buffer, index_text(s.out_index), v) << "\n";
      // In a vector group the group's values are folded together after its loop (welford_group):
      // one division per group rather than one per element, which chained through a row.
      if (welford && !em.lane.empty()) out << ind << "wv[" << em.lane << "] = " << v << ";\n";
      else if (welford) out << ind << "kiln::welford_add(acc, " << v << ");\n";
      else if (arg) out << ind << "acc = kiln::arg_combine<" << max_flag << ">(acc, " << state << "{" << v << ", " << position << "});\n";
      else out << ind << "acc = " << spell(info(op).combine, "acc", v) << ";\n";
      return std::string();
    };
    if (welford) {
      w.before_group = [T](StrBuilder& out, const std::string& ind, int V) { out << ind << T << " wv[" << V << "];\n"; };
      w.after_group = [](StrBuilder& out, const std::string& ind, int) { out << ind << "kiln::welford_group(acc, wv);\n"; };
    }
    const int V = stage_vector_width(s, n_outer_, n_outer_ + static_cast<int>(s.inner_sizes.size()));
    if (s.inner_sizes.empty()) {
      b << "    if (" << lane_ << " == 0) {\n";
      ExprEmitter em(p_, b, "      ", counter_);
      w.body(em, b, "      ", false);
      b << "    }\n";
    } else {
      emit_space_loop(b, "    ", s, n_outer_, lane_, std::to_string(width_), V, w);
    }
    // Combine the threads' partial results.
    std::string combine;
    if (welford) combine = "[](" + state + " a, " + state + " b) { return kiln::welford_combine(a, b); }";
    else if (arg) combine = "[](" + state + " a, " + state + " b) { return kiln::arg_combine<" + max_flag + ">(a, b); }";
    else combine = "[](" + T + " a, " + T + " b) { return " + spell(info(op).combine, "a", "b") + "; }";
    if (strategy_ == Strategy::kRowPerBlock) b << "    __shared__ " << state << " smem[32];\n";
    emit_allreduce(b, "acc", combine);
    if (welford) b << "    " << r << "_0 = acc.mean; " << r << "_1 = acc.m2;\n";
    else if (arg) b << "    " << r << "_0 = acc.v; " << r << "_1 = acc.i;\n";
    else b << "    " << r << "_0 = acc;\n";
    b << "  }\n";
    emit_reduction_stores(b, s);
  }

  std::string identity(ReduceOp op, DType t) {
    switch (info(op).identity) {
      case ReduceIdentity::kOne: return literal(1, t);
      case ReduceIdentity::kLowest: return is_floating(t) ? literal(-INFINITY, t) : integer_limit(t, false);
      case ReduceIdentity::kHighest: return is_floating(t) ? literal(INFINITY, t) : integer_limit(t, true);
      default: return literal(0, t);
    }
  }
  static std::string integer_limit(DType t, bool largest) {
    const char* v;
    switch (t) {
      case DType::kBool: v = largest ? "1" : "0"; break;
      case DType::kUInt8: v = largest ? "255" : "0"; break;
      case DType::kInt8: v = largest ? "127" : "-128"; break;
      case DType::kInt16: v = largest ? "32767" : "-32768"; break;
      case DType::kInt32: v = largest ? "2147483647" : "(-2147483647 - 1)"; break;
      default: v = largest ? "9223372036854775807ll" : "(-9223372036854775807ll - 1)"; break;
    }
    return std::string("static_cast<") + temp_type(t) + ">(" + v + ")";
  }

  const Program& p_;
  const Kernel& k_;
  bool allow_vectors_;
  CudaConfig config_;
  int n_outer_;
  int symbols_ = 0;  // size symbols the kernel takes (runtime sizes)
  std::string IT_ = "int";
  int64_t rows_ = 1;
  Strategy strategy_ = Strategy::kPointwise;
  int width_ = 1, block_ = 256;
  int split_ = 1;  // blocks per row (row_split)
  std::string lane_ = "0";
  CudaLaunch launch_;
  int vector_width_ = 1;
  std::set<int> aligned_;
  int counter_ = 0;
};

}  // namespace

namespace {

// A kernel and its scalar twin, rendered with one configuration under `name`. With `symbols`
// (runtime sizes), each function's text is also kept in the record (CudaKernel::text).
CudaKernel write_kernel(const Program& p, const Kernel& k, const std::string& name, const CudaConfig& config, StrBuilder& b, int symbols = 0) {
  StrBuilder vb;
  CudaKernel info = KernelWriter(p, k, true, config, symbols).write(vb, name);
  b << vb.str();
  if (symbols) info.text = vb.str();
  if (info.vector_width > 1) {
    StrBuilder sb;
    CudaKernel scalar = KernelWriter(p, k, false, config, symbols).write(sb, name + "_scalar");
    b << sb.str();
    info.scalar_name = scalar.name;
    info.scalar_launch = scalar.launch;
    if (symbols) info.scalar_text = sb.str();
  }
  return info;
}

// Configurations worth timing for a kernel besides its default: block sizes, vector accesses
// off, and for row kernels the other ways of mapping rows to threads.
std::vector<CudaConfig> tuning_configs(const Kernel& k) {
  bool reduction = false;
  for (const Stage& s : k.stages) reduction = reduction || s.kind == Stage::kReduction;
  const int thread = static_cast<int>(Strategy::kRowPerThread), warp = static_cast<int>(Strategy::kRowPerWarp),
            block = static_cast<int>(Strategy::kRowPerBlock);
  if (!reduction) return {{-1, 128, true}, {-1, 512, true}, {-1, 1024, true}, {-1, 256, false}};
  return {{thread, 128, true}, {thread, 256, true}, {warp, 128, true}, {warp, 256, true}, {warp, 512, true},
          {block, 128, true}, {block, 256, true}, {block, 512, true}, {block, 1024, true}, {-1, 0, true, false}};
}

}  // namespace

std::string config_string(const CudaConfig& c) {
  std::string s = c.strategy < 0 ? "default" : strategy_name(static_cast<Strategy>(c.strategy));
  if (c.block) s += " block=" + std::to_string(c.block);
  if (!c.vectors) s += " novec";
  if (!c.row_cache) s += " nocache";
  return s;
}

CudaModule generate_cuda(const Program& p, bool autotune, const CudaSizes* sizes) {
  CudaModule m;
  StrBuilder all;
  all << cuda_prefix_header() << "\n";
  SpellingScope scope(sizes ? &sizes->spelling : nullptr);
  const int symbols = sizes ? sizes->num_symbols : 0;
  if (symbols) autotune = false;  // one configuration serves every size
  for (const Kernel& k : p.kernels) {
    StrBuilder b;
    CudaKernel info = write_kernel(p, k, k.name, {}, b, symbols);
    info.config = "default";
    if (autotune) {
      // Each distinct alternative (rendered under a common name to compare) as <name>_t<i>.
      std::set<std::string> seen;
      {
        StrBuilder probe;
        write_kernel(p, k, "kiln_probe", {}, probe);
        seen.insert(probe.str());
      }
      for (const CudaConfig& c : tuning_configs(k)) {
        StrBuilder probe;
        write_kernel(p, k, "kiln_probe", c, probe);
        if (!seen.insert(probe.str()).second) continue;
        CudaKernel alt = write_kernel(p, k, k.name + "_t" + std::to_string(info.alternatives.size() + 1), c, b);
        alt.config = config_string(c);
        info.alternatives.push_back(std::move(alt));
      }
    }
    m.kernel_sources.push_back(b.str());
    all << m.kernel_sources.back();
    m.kernels.push_back(std::move(info));
  }
  m.source = all.str();
  return m;
}

std::optional<std::vector<CudaSizedLaunch>> cuda_sized_launches(const std::vector<CudaKernel>& kernels, const Program& p, const CudaSizes& sizes,
                                                                 std::string* why) {
  if (kernels.size() != p.kernels.size()) {
    *why = "the program has another number of kernels";
    return std::nullopt;
  }
  SpellingScope scope(&sizes.spelling);
  std::vector<CudaSizedLaunch> out;
  for (size_t i = 0; i < kernels.size(); ++i) {
    const CudaKernel& base = kernels[i];
    const Kernel& k = p.kernels[i];
    CudaConfig config;
    config.index64 = !base.index32;  // a 64-bit kernel serves sizes that would fit 32 bits
    StrBuilder vb;
    CudaKernel here = KernelWriter(p, k, true, config, sizes.num_symbols).write(vb, base.name);
    CudaSizedLaunch l;
    if (vb.str() == base.text) {
      l.launch = here.launch;
      if (l.vector) {
        StrBuilder sb;
        l.scalar_launch = KernelWriter(p, k, false, config, sizes.num_symbols).write(sb, base.scalar_name).launch;
      }
      out.push_back(l);
      continue;
    }
    // Vector accesses that do not hold at these sizes (an odd row length moves a row's start off
    // a group boundary): the scalar twin serves, if its code is the same.
    if (base.vector_width > 1) {
      StrBuilder sb;
      CudaKernel scalar = KernelWriter(p, k, false, config, sizes.num_symbols).write(sb, base.scalar_name);
      if (sb.str() == base.scalar_text) {
        l.vector = false;
        l.launch = l.scalar_launch = scalar.launch;
        out.push_back(l);
        continue;
      }
    }
    if (base.vector_width == 1) {  // a kernel without vector accesses, which these sizes would allow
      StrBuilder sb;
      CudaKernel scalar = KernelWriter(p, k, false, config, sizes.num_symbols).write(sb, base.name);
      if (sb.str() == base.text) {
        l.launch = l.scalar_launch = scalar.launch;
        out.push_back(l);
        continue;
      }
    }
    *why = "kernel " + base.name + " is generated differently at these sizes";
    return std::nullopt;
  }
  return out;
}

std::string launch_string(const CudaKernel& k) {
  StrBuilder b;
  b << k.name << ": " << k.strategy << " grid=" << static_cast<int64_t>(k.launch.grid) << " block=" << static_cast<int64_t>(k.launch.block);
  if (k.vector_width > 1) {
    b << " vec=" << k.vector_width << " aligned=[";
    b.join(k.aligned) << "] scalar grid=" << static_cast<int64_t>(k.scalar_launch.grid);
  }
  b << (k.index32 ? " index32" : " index64") << (k.checks ? " checks" : "") << " params=[";
  b.join(k.params) << "]";
  if (k.symbols) b << " symbols=" << k.symbols;
  return b.str();
}

}  // namespace kiln::codegen
