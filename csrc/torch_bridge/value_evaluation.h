// Values of a traced graph computed again at compile time, with ATen, from what a rewrite knows:
// values it seeds (random stand-ins for a pattern's inputs) and what sizes alone determine
// (factory operators and operators over them). A graph input, a tensor the graph closes over
// (a buffer, a parameter: either may change between calls) other than a wrapped Python number,
// or a random operator makes a value unknown. Used by the rewrites that must prove what a
// subgraph computes before replacing it (causal_masks.h, attention_fusion.h).
#pragma once
#include <map>
#include <optional>

#include "torch_bridge/tracer.h"

namespace kiln::bridge {

// Value `v` where it is a Python number the graph holds as a tensor (a wrapped 0-d constant: the
// one kind of constant that cannot change between calls), else nullptr.
const at::Tensor* wrapped_number(const TraceResult& tr, int v);

class ValueEvaluator {
 public:
  explicit ValueEvaluator(const TraceResult& tr) : tr_(tr) {}
  // `value` is `t` from now on (a pattern's input).
  void seed(int value, at::Tensor t) { values_[value] = std::move(t); }
  // The value, evaluating what it is computed from (each node once), or nullopt where something
  // it depends on is unknown, an operator fails, or more than `kMaxNodes` nodes would run.
  std::optional<at::Tensor> value(int v);

 private:
  static constexpr int kMaxNodes = 64;
  const TraceResult& tr_;
  std::map<int, at::Tensor> values_;
  int evaluated_ = 0;
};

// Whether a float bias (broadcast over batch and heads) is SDPA's causal mask for L queries and
// S keys: zero on and below the diagonal of the top-left L x S block, at most -65504 above it
// (-inf, a dtype's lowest value, or float16's, which PyTorch's cuDNN path fills a boolean mask
// with: its softmax weight is zero unless a row's scores differ by more than 65,000).
bool is_causal_bias(const at::Tensor& bias, int64_t L, int64_t S);
// Whether a boolean mask (true: masked out, broadcast likewise) masks exactly the causal mask's
// entries above the diagonal.
bool is_causal_exclusion(const at::Tensor& mask, int64_t L, int64_t S);

}  // namespace kiln::bridge
