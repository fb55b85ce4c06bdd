// The CUDA generator's kernel writer (private to csrc/codegen/cuda): one scheduled loop-IR kernel
// rendered as a CUDA function, its launch configuration and its vector accesses. Members are
// defined in kernel_writer.cpp (strategy, launch, body, stages, element and vector-group loops),
// row_caches.cpp (what row kernels keep in registers: row loads, folded values, prefetches) and
// row_reductions.cpp (reductions across a row's threads); cuda_codegen.cpp drives it.
#pragma once
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "codegen/cuda/cuda_codegen.h"
#include "codegen/cuda/cuda_expr.h"

namespace kiln::codegen::cuda {

enum class Strategy { kPointwise, kRowPerThread, kRowPerWarp, kRowPerBlock };
inline const char* strategy_name(Strategy s) {
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

  CudaKernel write(StrBuilder& b, const std::string& name);

 private:
  // kernel_writer.cpp, row_caches.cpp, row_reductions.cpp (each member's comment is at its definition)
  void choose_strategy();
  int row_split() const;
  void emit_body(StrBuilder& b);
  void plan_caches(StrBuilder& b);
  int symbolic_row_groups();
  void clear_cache_plan();
  static std::string indented(const std::string& text);
  void emit_stages(StrBuilder& b);

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

  int cache_groups(const Stage& s, int V) const;
  std::string load_key(const Stage& s, const Expr& e, int V, int G) const;
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

  static std::vector<const Expr*> value_matches(const ExprPtr& root, const ExprPtr& v);
  static void for_each_node_outside(const ExprPtr& root, const std::set<const Expr*>& skip, const std::function<void(const Expr&)>& f);
  void plan_value_cache(StrBuilder& b);
  bool uses_values(const Stage& s, int V, int G) const;
  void plan_row_cache(StrBuilder& b);
  void emit_prefetch(StrBuilder& b);
  std::map<std::string, CachedLoad> cache_;
  int cache_bytes_ = 0;       // registers (bytes per thread) the planned caches take
  int symbolic_groups_ = 0;   // cache groups per thread of a row of a runtime length
  std::set<std::string> fits_;  // conditions under which the cached body's rows fit its groups

  void define_vars(StrBuilder& b, const std::string& ind, const std::string& flat, int first, int last, const Stage* s = nullptr);
  int stage_vector_width(const Stage& s, int first_var, int end_var);
  bool hoist_channel_invariants(StrBuilder& b, const std::string& ind, const Stage& s, int V);
  // Grid-stride trips per thread a pointwise kernel with hoisted values aims for, and the fewest
  // blocks it keeps (about eight resident blocks per SM on a Hopper part).
  static constexpr int kHoistedTrips = 8;
  static constexpr int64_t kHoistedMinBlocks = 1024;
  ElementWork pointwise_work(const Stage& s);
  void emit_space_loop(StrBuilder& b, const std::string& ind, const Stage& s, int first_var, const std::string& start,
                       const std::string& step, int V, const ElementWork& work);
  void emit_group(StrBuilder& b, const std::string& in, const Stage& s, int first_var, int end_var, int V, const ElementWork& work,
                  const std::string& groups_per_row, const int64_t& last, const std::string& xv, int j, int G);
  const CachedValue* folded_values(const Stage& s);
  void emit_allreduce(StrBuilder& b, const std::string& v, const std::string& combine);
  void emit_two_pass_moments(StrBuilder& b, const Stage& s, const CachedValue& c);
  void emit_reduction_stores(StrBuilder& b, const Stage& s);
  void emit_reduction(StrBuilder& b, const Stage& s);
  std::string identity(ReduceOp op, DType t);

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
  // The stage being written: subexpressions computed before its loop (hoist_channel_invariants),
  // by node, as the register array holding them per lane.
  std::map<const Expr*, std::string> hoisted_;
};

}  // namespace kiln::codegen::cuda
