// Min-cut rematerialisation (see min_cut.h): the flow network and a Dinic max-flow over it.
#include "autograd/min_cut.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <queue>
#include <unordered_set>

namespace kiln::autograd {

using ir::AtenGraph;
using ir::AtenValue;

namespace {

constexpr int64_t kInf = std::numeric_limits<int64_t>::max() / 4;

std::string base_name(const std::string& op) {
  auto dot = op.find('.');
  return dot == std::string::npos ? op : op.substr(0, dot);
}

int64_t bytes(const ir::TensorMeta& m) { return std::max<int64_t>(1, m.numel() * ir::element_size(m.dtype)); }

class MaxFlow {
 public:
  explicit MaxFlow(int n) : adj_(n), level_(n), it_(n) {}
  void edge(int a, int b, int64_t cap) {
    adj_[a].push_back(static_cast<int>(e_.size()));
    e_.push_back({b, cap});
    adj_[b].push_back(static_cast<int>(e_.size()));
    e_.push_back({a, 0});
  }
  void run(int s, int t) {
    while (bfs(s, t)) {
      std::fill(it_.begin(), it_.end(), 0);
      while (dfs(s, t, kInf) > 0) {}
    }
  }
  // Nodes reachable from s in the residual graph (the source side of a minimum cut).
  std::vector<bool> source_side(int s) const {
    std::vector<bool> seen(adj_.size(), false);
    std::vector<int> stack{s};
    seen[s] = true;
    while (!stack.empty()) {
      int u = stack.back();
      stack.pop_back();
      for (int id : adj_[u])
        if (e_[id].cap > 0 && !seen[e_[id].to]) {
          seen[e_[id].to] = true;
          stack.push_back(e_[id].to);
        }
    }
    return seen;
  }

 private:
  struct E { int to; int64_t cap; };
  bool bfs(int s, int t) {
    std::fill(level_.begin(), level_.end(), -1);
    std::queue<int> q;
    level_[s] = 0;
    q.push(s);
    while (!q.empty()) {
      int u = q.front();
      q.pop();
      for (int id : adj_[u])
        if (e_[id].cap > 0 && level_[e_[id].to] < 0) {
          level_[e_[id].to] = level_[u] + 1;
          q.push(e_[id].to);
        }
    }
    return level_[t] >= 0;
  }
  int64_t dfs(int u, int t, int64_t f) {
    if (u == t) return f;
    for (int& i = it_[u]; i < static_cast<int>(adj_[u].size()); ++i) {
      E& e = e_[adj_[u][i]];
      if (e.cap <= 0 || level_[e.to] != level_[u] + 1) continue;
      int64_t got = dfs(e.to, t, std::min(f, e.cap));
      if (got > 0) {
        e.cap -= got;
        e_[adj_[u][i] ^ 1].cap += got;
        return got;
      }
    }
    return 0;
  }
  std::vector<std::vector<int>> adj_;
  std::vector<E> e_;
  std::vector<int> level_, it_;
};

}  // namespace

static const std::unordered_set<std::string>& view_ops() {
  static const std::unordered_set<std::string> views = {
      "aten::view", "aten::_unsafe_view", "aten::reshape", "aten::t", "aten::transpose", "aten::permute", "aten::expand",
      "aten::unsqueeze", "aten::squeeze", "aten::select", "aten::slice", "aten::alias", "aten::detach", "aten::view_as"};
  return views;
}

bool recomputable(const ir::AtenNode& n) {
  if (n.nondeterministic) return false;
  static const std::unordered_set<std::string> cheap = {
      // pointwise
      "aten::abs", "aten::neg", "aten::exp", "aten::log", "aten::sqrt", "aten::rsqrt", "aten::sin", "aten::cos", "aten::tanh",
      "aten::sigmoid", "aten::relu", "aten::erf", "aten::reciprocal", "aten::silu", "aten::gelu", "aten::square", "aten::sign",
      "aten::add", "aten::sub", "aten::mul", "aten::div", "aten::pow", "aten::maximum", "aten::minimum", "aten::where",
      "aten::clamp", "aten::clamp_min", "aten::clamp_max", "aten::eq", "aten::ne", "aten::lt", "aten::le", "aten::gt", "aten::ge",
      "aten::logical_not", "aten::logical_and", "aten::logical_or", "aten::masked_fill", "aten::rsub", "aten::_to_copy",
      "aten::to", "aten::clone", "aten::leaky_relu", "aten::hardtanh", "aten::threshold", "aten::fill",
      // factories
      "aten::full", "aten::zeros", "aten::ones", "aten::scalar_tensor", "aten::full_like", "aten::zeros_like", "aten::ones_like",
      "aten::empty", "aten::lift_fresh_copy"};
  const std::string base = base_name(n.op);
  return cheap.count(base) > 0 || view_ops().count(base) > 0;
}

bool fusible_reader(const ir::AtenNode& n) {
  static const std::unordered_set<std::string> fused = {
      "aten::sum", "aten::mean", "aten::amax", "aten::amin", "aten::_softmax", "aten::_log_softmax", "aten::native_layer_norm",
      "aten::native_layer_norm_backward", "aten::_softmax_backward_data", "aten::gelu_backward", "aten::threshold_backward",
      "aten::tanh_backward", "aten::sigmoid_backward", "aten::silu_backward", "aten::var", "aten::std", "aten::var_mean",
      "aten::cat", "aten::stack", "aten::split", "aten::split_with_sizes", "aten::unbind", "aten::tril", "aten::triu",
      "aten::embedding", "aten::gather", "aten::index_select", "aten::masked_fill", "aten::addcmul", "aten::addcdiv", "aten::lerp"};
  return recomputable(n) || fused.count(base_name(n.op)) > 0;
}

std::vector<bool> materialized_in_backward(const AtenGraph& g, const std::vector<int>& backward_nodes) {
  std::vector<bool> mat(g.values.size(), false), in_backward(g.nodes.size(), false);
  for (int b : backward_nodes) in_backward[b] = true;
  // In reverse graph order, so that a view's readers are seen before the view (a forward view a
  // backward matmul reads passes the need on to what it views).
  for (int i = static_cast<int>(g.nodes.size()) - 1; i >= 0; --i) {
    const ir::AtenNode& n = g.nodes[i];
    bool needs = in_backward[i] && !fusible_reader(n);
    if (!needs && view_ops().count(base_name(n.op)))
      for (int o : n.outputs) needs = needs || (o >= 0 && mat[o]);
    if (!needs) continue;
    for (const auto& a : n.args) {
      if (a.kind == ir::AtenArg::kTensor && a.value >= 0) mat[a.value] = true;
      for (int x : a.values)
        if (x >= 0) mat[x] = true;
    }
  }
  return mat;
}

std::vector<int> min_cut_saved_values(const AtenGraph& g, const std::vector<bool>& forward,
                                      const std::vector<int>& backward_reads, int num_primals,
                                      const std::vector<bool>& materialized) {
  const int nv = static_cast<int>(g.values.size());
  const int source = 2 * nv, sink = 2 * nv + 1;
  MaxFlow f(2 * nv + 2);
  auto in = [](int v) { return 2 * v; };
  auto out = [](int v) { return 2 * v + 1; };
  std::vector<bool> in_network(nv, false);
  for (int v = 0; v < nv; ++v) {
    const AtenValue& val = g.values[v];
    if (val.kind == AtenValue::kInput) {
      if (val.index >= num_primals) continue;  // tangents are backward-only
      f.edge(source, in(v), kInf);
      f.edge(in(v), out(v), 0);  // alive anyway: free to save
    } else if (val.kind == AtenValue::kConstant) {
      f.edge(source, in(v), kInf);
      f.edge(in(v), out(v), 0);
    } else {
      if (!forward[val.index]) continue;
      f.edge(in(v), out(v), bytes(val.meta));
    }
    in_network[v] = true;
  }
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    if (!forward[n]) continue;
    const ir::AtenNode& node = g.nodes[n];
    const bool cheap = recomputable(node);
    const bool view = view_ops().count(base_name(node.op)) > 0;
    for (int o : node.outputs) {
      if (o < 0) continue;
      if (!cheap || (!view && materialized[o])) {
        f.edge(source, in(o), kInf);
        continue;
      }
      for (const auto& a : node.args) {
        if (a.kind == ir::AtenArg::kTensor && a.value >= 0 && in_network[a.value]) f.edge(out(a.value), in(o), kInf);
        for (int x : a.values)
          if (x >= 0 && in_network[x]) f.edge(out(x), in(o), kInf);
      }
    }
  }
  for (int r : backward_reads)
    if (r >= 0 && in_network[r]) f.edge(out(r), sink, kInf);
  f.run(source, sink);
  std::vector<bool> side = f.source_side(source);
  std::vector<int> saved;
  for (int v = 0; v < nv; ++v)
    if (in_network[v] && g.values[v].kind == AtenValue::kNodeOutput && side[in(v)] && !side[out(v)]) saved.push_back(v);
  return saved;
}

}  // namespace kiln::autograd
