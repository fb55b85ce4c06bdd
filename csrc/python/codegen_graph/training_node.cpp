// A training call's autograd nodes: run_training_call runs the compiled forward and gives its
// differentiable outputs one C++ autograd node per output group (TrainingStages::component_outputs),
// whose apply runs the compiled backward (built on the first call). Nothing on the per-call path
// touches Python: the node is what a torch.autograd.Function would give, without its Python
// objects (ctx, saved-tensor lists, the backward's frames).
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/saved_variable.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "python/codegen_graph/training_stages.h"
#include "torch_bridge/autograd_node.h"

namespace kiln::python {

namespace {

using torch::autograd::Edge;
using torch::autograd::edge_list;
using torch::autograd::Node;
using torch::autograd::variable_list;

// What one call's forward leaves for its backward, shared by the call's nodes.
struct SavedCall {
  std::shared_ptr<TrainingStages> stages;
  // The backward's saved inputs: aliases of the saved primals and values without autograd
  // history (an output saved by its own node would be a cycle), sharing their version counters.
  std::vector<at::Tensor> saved;
  std::vector<uint32_t> versions;  // per saved tensor: its version after the forward
  // Saved values that are the new contents of an input the forward wrote: an alias of that input
  // and its version after the write, checked with the saved tensor (eager saved the input).
  struct Watched {
    int saved;
    at::Tensor input;
    uint32_t version;
  };
  std::vector<Watched> watched;
  struct Tangent {
    std::vector<int64_t> sizes;
    at::TensorOptions options;
  };
  std::vector<Tangent> tangents;  // per tangent: its output's sizes and options (placeholders)
};

// A tensor over `t`'s memory with its sizes and strides and no autograd history, sharing t's
// version counter, made without a dispatcher call. Tensors of a Python subclass or not strided
// take the dispatcher's route.
at::Tensor shallow_alias(const at::Tensor& t) {
  if (t.layout() != c10::kStrided || t.key_set().has(c10::DispatchKey::Python) || !t.has_storage()) return t.detach();
  auto impl = c10::make_intrusive<c10::TensorImpl>(c10::Storage(t.storage()), t.key_set() - c10::autograd_dispatch_keyset, t.dtype());
  impl->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  impl->set_version_counter(t.unsafeGetTensorImpl()->version_counter());
  return at::Tensor(std::move(impl));
}

// Whether a and b are over the same memory. Tensors with no memory (an empty batch: the allocator
// gives every one a null pointer) share none: taken for aliases, an output of the node's own was
// made again as a view of an empty input, and the gradient skipped the node (fuzz seed 16884).
bool same_storage(const at::Tensor& a, const at::Tensor& b) {
  return a.has_storage() && b.has_storage() && a.device() == b.device() && a.dtype() == b.dtype() &&
         a.storage().data() != nullptr && a.storage().data() == b.storage().data();
}

// "torch.FloatTensor", "torch.cuda.HalfTensor": Python's tensor.type().
std::string type_name(const at::Tensor& t) {
  return std::string("torch.") + (t.is_cuda() ? "cuda." : "") + c10::toString(t.scalar_type()) + "Tensor";
}

using bridge::make_node;

class TrainingNode : public Node {
 public:
  TrainingNode(std::shared_ptr<SavedCall> call, int group) : call_(std::move(call)), group_(group) {}

  std::string name() const override { return "KilnCompiledBackward"; }

  void release_variables() override {
    std::lock_guard<std::mutex> lock(mutex_);
    call_.reset();
  }

  variable_list apply(variable_list&& grads) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (c10::GradMode::is_enabled())  // backward(create_graph=True): the compiled backward is not differentiable
      throw std::runtime_error(
          "kiln: double backward (create_graph=True) through a graph kiln compiled for training is not supported yet; "
          "compile with backend='eager' or run this part without kiln.compile");
    if (!call_) throw std::runtime_error(torch::autograd::ERR_BACKWARD_TWICE);
    TrainingStages& st = *call_->stages;
    if (st.component_grads[group_].empty()) return {};
    const std::vector<int>& outputs = st.component_outputs[group_];
    // Per tangent: whether autograd gave this node a gradient for its output. An output the loss
    // does not use gets none (undefined), which is not a zero gradient: its formulas must not run
    // (0 * inf in one of them would put NaN into a gradient eager computes finite).
    std::vector<bool> given(st.num_tangents, false);
    std::vector<at::Tensor> in = call_->saved;
    in.resize(call_->saved.size() + st.num_tangents);
    for (size_t k = 0; k < outputs.size(); ++k) {
      if (!grads[k].defined()) continue;
      int t = st.tangent_of_output[outputs[k]];
      given[t] = true;
      in[st.first_tangent + t] = grads[k].contiguous();
    }
    bool all = true;
    for (int t = 0; t < st.num_tangents; ++t) {
      if (given[t]) continue;
      all = false;  // a placeholder the pruned backward does not read
      in[st.first_tangent + t] = at::empty(call_->tangents[t].sizes, call_->tangents[t].options);
    }
    std::vector<at::Tensor> res;
    if (all) {
      check_versions(nullptr);
      res = st.backward().run(in);
    } else {
      const TrainingStages::Pruned& p = st.pruned_for(given);
      check_versions(&p.reads);
      std::vector<at::Tensor> got = p.graph->run(in);
      size_t k = 0;
      res.resize(p.zero_output.size());
      for (size_t i = 0; i < res.size(); ++i)
        if (!p.zero_output[i]) res[i] = std::move(got[k++]);
    }
    variable_list out;
    out.reserve(st.component_grads[group_].size());
    for (int p : st.component_grads[group_]) {
      // An input reached only from outputs the loss did not use gets no gradient, as in eager
      // (its .grad stays None rather than becoming zeros).
      bool reached = all || std::any_of(st.grad_tangents[p].begin(), st.grad_tangents[p].end(), [&](int t) { return given[t]; });
      out.push_back(reached ? std::move(res[p]) : at::Tensor());
    }
    return out;
  }

 private:
  // Autograd's check that a saved tensor was not written in place since the forward, for the
  // saved tensors this backward reads (all, or `reads`; eager checks those of the formulas it
  // runs). Once per node: a second backward under retain_graph=True is not checked.
  void check_versions(const std::vector<int>* reads) {
    if (checked_) return;
    checked_ = true;
    const size_t n = reads ? reads->size() : call_->saved.size();
    for (size_t k = 0; k < n; ++k) {
      const int i = reads ? (*reads)[k] : static_cast<int>(k);
      check_version(call_->saved[i], call_->versions[i]);
      for (const auto& w : call_->watched)
        if (w.saved == i) check_version(w.input, w.version);
    }
  }

  static void check_version(const at::Tensor& t, uint32_t expected) {
    if (t._version() == expected) return;
    std::string sizes;
    for (int64_t d : t.sizes()) {
      if (!sizes.empty()) sizes += ", ";
      sizes += std::to_string(d);
    }
    throw std::runtime_error("one of the variables needed for gradient computation has been modified by an inplace operation: [" +
                             type_name(t) + " [" + sizes + "]], which is saved by a graph kiln compiled, is at version " +
                             std::to_string(t._version()) + "; expected version " + std::to_string(expected) +
                             " instead. Hint: the tensor was written in place after the compiled call and before backward");
  }

  std::shared_ptr<SavedCall> call_;
  int group_;
  bool checked_ = false;
};

}  // namespace

std::vector<at::Tensor> run_training_call(const std::shared_ptr<TrainingStages>& stages, std::vector<at::Tensor> inputs) {
  const TrainingStages& st = *stages;
  const int n = st.num_outputs;
  const int m = static_cast<int>(st.mutated_inputs.size());
  auto call = std::make_shared<SavedCall>();
  call->stages = stages;
  std::vector<at::Tensor> outs;
  {
    c10::NoGradGuard no_grad;
    {
      py::gil_scoped_release nogil;
      outs = st.fwd->run(inputs);
    }
    // The backward reads inputs as they were before this call wrote any of them.
    call->saved.reserve(st.saved_primals.size() + outs.size() - n - m);
    for (int i : st.saved_primals) {
      bool written = std::find(st.mutated_inputs.begin(), st.mutated_inputs.end(), i) != st.mutated_inputs.end();
      // A copy with the input's own strides (the backward was compiled for them; clone() makes a
      // strided slice contiguous).
      call->saved.push_back(written ? at::empty_strided(inputs[i].sizes(), inputs[i].strides(), inputs[i].options()).copy_(inputs[i]) : inputs[i]);
    }
    // Running statistics and the like; an input that requires grad is written after the nodes
    // exist, under autograd, so its history leads through the node to its old contents.
    for (int k = 0; k < m; ++k)
      if (!st.output_requires_grad[n + k]) inputs[st.mutated_inputs[k]].copy_(outs[n + k]);
    for (size_t k = n + m; k < outs.size(); ++k) {
      // The new contents of an input written above, saved for the backward: eager's formulas
      // saved the input itself, whose version a later write bumps, so backward then raises
      // (fuzz seed 14647: a0.fill_() feeds a Linear, a0[0].zero_() after a graph break).
      // The saved copy keeps the layout the backward was compiled for; the input is watched.
      for (int j = 0; j < m; ++j)
        if (!st.output_requires_grad[n + j] && outs[k].unsafeGetTensorImpl() == outs[n + j].unsafeGetTensorImpl()) {
          const at::Tensor& in = inputs[st.mutated_inputs[j]];
          call->watched.push_back({static_cast<int>(call->saved.size()), shallow_alias(in), static_cast<uint32_t>(in._version())});
          break;
        }
      call->saved.push_back(std::move(outs[k]));
    }
  }
  outs.resize(n + m);
  // A saved tensor that is an input, an output or a view (whose autograd metadata holds its base)
  // is held as an alias: an output would point back at its node (a cycle), and none may carry
  // autograd history into the backward. The other saved values are the forward's own tensors,
  // which nothing else sees: held as they are.
  const size_t num_primals = st.saved_primals.size();
  call->versions.reserve(call->saved.size());
  for (size_t i = 0; i < call->saved.size(); ++i) {
    at::Tensor& t = call->saved[i];
    call->versions.push_back(t._version());
    bool shared = i < num_primals || t.unsafeGetTensorImpl()->autograd_meta() != nullptr;
    for (int k = 0; k < n + m && !shared; ++k) shared = outs[k].unsafeGetTensorImpl() == t.unsafeGetTensorImpl();
    if (shared) t = shallow_alias(t);
  }
  // An output that is a view of a buffer of the node's own is a tensor of its own. One that is a
  // view of an input or of another output (eager's `t[0]`, `y.narrow(...)`), or is an input, is
  // made again after the node as a view of that base, so autograd sees eager's view (a view made
  // by the node could not be written in place, where eager's can).
  const int num_in = static_cast<int>(inputs.size());
  std::vector<bool> is_input(n, false);
  for (int k = 0; k < n; ++k)
    for (const at::Tensor& b : inputs) is_input[k] = is_input[k] || outs[k].unsafeGetTensorImpl() == b.unsafeGetTensorImpl();
  // A non-view output over memory of an input is an alias of it all the same (detach()'s result,
  // which autograd does not call a view): never a base, or a view of the input that requires grad
  // would be made again from the detached alias, without its history (fuzz seed 14965).
  std::vector<bool> aliases_input(n, false);
  for (int k = 0; k < n; ++k)
    for (const at::Tensor& b : inputs) aliases_input[k] = aliases_input[k] || is_input[k] || same_storage(outs[k], b);
  // Nor is an output without gradient the base of one with (`t.detach()` returned beside t, a
  // view of the node's own buffer: t was made again from the detached alias, without its history,
  // and the gradient of everything before it was lost, fuzz seed 21261).
  auto own_base = [&](int k) {  // a non-view output of the node's own memory sharing output k's
    for (int j = 0; j < n; ++j)
      if (j != k && !aliases_input[j] && !outs[j].is_view() && same_storage(outs[k], outs[j]) &&
          (st.output_requires_grad[j] || !st.output_requires_grad[k]))
        return j;
    return -1;
  };
  for (int k = 0; k < n; ++k) {
    if (!outs[k].is_view() || is_input[k] || own_base(k) >= 0) continue;
    bool of_input = false;
    for (const at::Tensor& b : inputs) of_input = of_input || same_storage(outs[k], b);
    if (!of_input) outs[k] = outs[k].detach();
  }
  std::vector<int> view_base(n, -1);  // per output made again: its base, an input i (i) or an output j (num_in + j)
  for (int k = 0; k < n; ++k) {
    if (!outs[k].is_view() && !is_input[k]) continue;
    int j = own_base(k);
    int base = j >= 0 ? num_in + j : -1;
    for (int i = 0; i < num_in && base < 0; ++i)
      if (same_storage(outs[k], inputs[i])) base = i;
    if (base >= 0 && st.output_requires_grad[k]) view_base[k] = base;
    else outs[k] = outs[k].detach();  // an alias that gets no gradient
  }
  for (int k = 0; k < n + m; ++k)
    if (st.tangent_of_output[k] >= 0) call->tangents.push_back({outs[k].sizes().vec(), outs[k].options()});
  for (size_t g = 0; g < st.component_outputs.size(); ++g) {
    edge_list edges;
    bool any = false;
    for (int p : st.component_grads[g]) {
      const at::Tensor& in = inputs[st.grad_of[p]];
      if (in.requires_grad()) {
        edges.push_back(torch::autograd::impl::gradient_edge(in));
        any = true;
      } else {
        edges.emplace_back();
      }
    }
    // A group whose outputs reach no input's gradient (norm(p=0)'s formula gives none) still
    // requires grad, as eager's outputs do: a node without edges, whose backward does nothing.
    if (!any && !st.component_grads[g].empty()) continue;
    auto node = make_node<TrainingNode>(call, static_cast<int>(g));
    node->set_next_edges(std::move(edges));
    for (int j : st.component_outputs[g]) {
      if (j < n && view_base[j] >= 0) {
        node->add_input_metadata(Node::undefined_input());
        continue;
      }
      torch::autograd::create_gradient_edge(outs[j], node);
    }
  }
  for (int k = 0; k < n; ++k) {
    if (view_base[k] < 0) continue;
    const at::Tensor& b = view_base[k] < num_in ? inputs[view_base[k]] : outs[view_base[k] - num_in];
    outs[k] = b.as_strided(outs[k].sizes(), outs[k].strides(), outs[k].storage_offset());
  }
  for (int k = 0; k < m; ++k)
    if (st.output_requires_grad[n + k]) inputs[st.mutated_inputs[k]].copy_(outs[n + k]);  // CopyBackwards, as eager's write records
  outs.resize(n);
  return outs;
}

}  // namespace kiln::python
