// What KernelWriter's row kernels keep in registers (see kernel_writer.h): the row's loads that
// several stages read (row cache), values a reduction folds that a later stage needs again (value
// cache), and loads issued at the kernel's start (prefetch).
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

// Rows of a block (over 1024 elements) keep the load cache off by default unless the value
// cache holds values of the row: a block's row stays in L2 between stages, and the registers
// cost occupancy (pointwise_ln, 4096 floats a row, on an H100 before the value cache: 0.19 ms
// with the load cache, 0.155 without). Autotuning still tries it (an explicit row_per_block
// configuration), and 'nocache' turns both caches off.
// The row value cache (plan_value_cache) is on for every row strategy: it saves arithmetic
// as well as memory traffic. Where it holds values, the loads of their stages are cached too,
// so that a row block's loads are all issued at the kernel's start.
void KernelWriter::plan_caches(StrBuilder& b) {
  plan_value_cache(b);
  const bool cache = strategy_ != Strategy::kRowPerBlock || config_.strategy >= 0 || !values_.empty();
  if (cache) plan_row_cache(b);
}

// Groups per thread for the cache of a row stage whose length is a runtime size: as many as the
// register budget holds, by what the caches cost per group (0: none would be cached). dyn_seq's
// masked softmax (bf16 scores, groups of 8, a row per warp) keeps its scores and two row values
// in 80 bytes a group: 3 groups, rows up to 768.
int KernelWriter::symbolic_row_groups() {
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
void KernelWriter::clear_cache_plan() {
  cache_.clear();
  values_.clear();
  value_bytes_ = 0;
  cache_bytes_ = 0;
}

// Groups per thread of a row stage's vector loop, or 0 where it does not qualify (tails,
// element-wise stages, more groups than kMaxCacheGroups).
// A row of a runtime length (one inner variable) gets symbolic_groups_, guarded per group.
int KernelWriter::cache_groups(const Stage& s, int V) const {
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
std::string KernelWriter::load_key(const Stage& s, const Expr& e, int V, int G) const {
  std::string key = "b" + std::to_string(e.buffer) + " + (" + index_text(e.index) + ")|" + std::to_string(V) + "|" + std::to_string(G) + "|";
  for (int64_t n : s.inner_sizes) key += std::to_string(n) + ",";
  return key;
}

// The nodes of `root` that compute `v` (outermost ones; each node once).
std::vector<const Expr*> KernelWriter::value_matches(const ExprPtr& root, const ExprPtr& v) {
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
void KernelWriter::for_each_node_outside(const ExprPtr& root, const std::set<const Expr*>& skip, const std::function<void(const Expr&)>& f) {
  std::set<const Expr*> seen;
  std::function<void(const ExprPtr&)> walk = [&](const ExprPtr& e) {
    if (skip.count(e.get()) || !seen.insert(e.get()).second) return;
    f(*e);
    for (const ExprPtr& a : e->args) walk(a);
    for (const auto& ind : e->indirect) walk(ind.value);
  };
  walk(root);
}

void KernelWriter::plan_value_cache(StrBuilder& b) {
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
bool KernelWriter::uses_values(const Stage& s, int V, int G) const {
  for (const CachedValue& c : values_) {
    if (c.V != V || c.G != G) continue;
    if (c.producer == &s || std::find(c.consumers.begin(), c.consumers.end(), &s) != c.consumers.end()) return true;
  }
  return false;
}

// Which loads to cache; declares their register arrays.
void KernelWriter::plan_row_cache(StrBuilder& b) {
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
void KernelWriter::emit_prefetch(StrBuilder& b) {
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

// The row value cache entry that holds every value a reduction stage folds (this thread's
// share of the row, in registers once its loop is done), or nullptr.
const KernelWriter::CachedValue* KernelWriter::folded_values(const Stage& s) {
  if (s.inner_sizes.empty()) return nullptr;
  const int V = stage_vector_width(s, n_outer_, n_outer_ + static_cast<int>(s.inner_sizes.size()));
  for (const CachedValue& c : values_)
    if (c.producer == &s && c.V == V && c.G == cache_groups(s, V)) return &c;
  return nullptr;
}

}  // namespace kiln::codegen::cuda
