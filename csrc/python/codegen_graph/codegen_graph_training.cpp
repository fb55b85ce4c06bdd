// CodegenGraph's calls with autograd (see codegen_graph.h): the joint trace, the partitioned
// forward/backward pair per size signature (training_stages.h, training_sizes.h), and running it.
#include "python/codegen_graph/codegen_graph.h"

namespace kiln::python {

// Training: a compiled forward/backward pair, built on the first call with a size signature
// from a joint trace on detached copies; that call then runs the pair it built. A graph with symbolic
// sizes trained on batches of several lengths gets one pair whose kernels take the sizes at run
// time once three sizes planned alike (training_sizes.h); other sizes, and every size
// where no template fits, get a pair each. Past max_variants_ of those, or once a build failed,
// calls run the graph op by op (not declined: the frame stays one graph).
//
// A tensor passed more than once is one input of the pair (traced as one tensor, so a write to
// one argument is seen through the other and its gradients are summed inside the backward);
// which arguments repeat is part of the signature, and such calls get a pair per size.
py::object CodegenGraph::training_call(const std::vector<at::Tensor>& all_inputs, const IntArgs& ints, py::args args) {
  std::vector<int64_t> sig = size_signature(all_inputs, ints);
  std::vector<int> first = first_of_repeated(all_inputs);
  std::vector<at::Tensor> distinct;
  if (!first.empty()) {
    sig.push_back(std::numeric_limits<int64_t>::min());  // then the repeated arguments
    sig.insert(sig.end(), first.begin(), first.end());
    for (size_t i = 0; i < first.size(); ++i)
      if (first[i] == static_cast<int>(i)) distinct.push_back(all_inputs[i]);
  }
  const std::vector<at::Tensor>& inputs = first.empty() ? all_inputs : distinct;
  auto found = trainings_.find(sig);
  if (found == trainings_.end()) {
    if (training_failed_) return eager_(*args);
    if (training_sizes_.pending(sig)) return eager_(*args);  // planned, waiting for the template
    if (runtime_sizes_ && !opts_.extern_only && !trainings_.empty() && first.empty()) {
      const std::vector<int64_t> dims = call_dims(inputs, ints);
      if (training_sizes_.wants(sig, dims)) return training_sample(std::move(sig), dims, inputs, ints, args);
    }
    if (training_builds_ >= variant_limit()) return eager_(*args);
    std::shared_ptr<TrainingStages> st = build_training(inputs, ints, first);
    if (!grad_free_) trainings_.emplace(sig, st);
    if (st) {
      if (training_builds_++ == 0 && first.empty()) training_sizes_.set_base(call_dims(inputs, ints), call_dim_names(inputs, ints), st);
      training_ = st;
    } else {
      training_failed_ = !grad_free_;
    }
    if (!on_compiled_.is_none()) on_compiled_(this);
    if (grad_free_) return call(args);
    if (st) return run_pair(st, inputs, args);
    return eager_(*args);
  }
  if (!found->second) return eager_(*args);
  return run_pair(found->second, inputs, args);
}

// One training call on a built pair, or eagerly where an input the pair writes in place shares
// memory with another input (the pair reads them as independent values: the other would miss
// the write) or with itself (an expanded tensor: eager's fill_ writes it, the copy back of the
// new contents cannot), as inference graphs decline such calls; and where autograd records the
// write (it requires grad) and it is a leaf or a view (eager raises for a leaf or a view of
// one, at the write).
py::object CodegenGraph::run_pair(const std::shared_ptr<TrainingStages>& st, const std::vector<at::Tensor>& inputs, py::args args) {
  if (!st->mutated_inputs.empty()) {
    if (runtime::written_input_aliases(st->mutated_inputs, [](int i) { return i; }, inputs)) return eager_(*args);
    for (size_t k = 0; k < st->mutated_inputs.size(); ++k) {
      const at::Tensor& t = inputs.at(st->mutated_inputs[k]);
      if (at::has_internal_overlap(t) == at::MemOverlap::Yes) return eager_(*args);
      if (st->output_requires_grad[st->num_outputs + k] && (t.is_leaf() || t.is_view())) return eager_(*args);
    }
  }
  return pack(run_training_call(st, inputs));
}

// A new size signature of a training graph with runtime sizes: planned (traced, partitioned,
// lowered; no code generated) and handed to training_sizes_, which keeps it as a sample, fits
// the templates or serves it with their kernels. The call runs eagerly.
py::object CodegenGraph::training_sample(std::vector<int64_t> sig, const std::vector<int64_t>& dims, const std::vector<at::Tensor>& inputs,
                           const IntArgs& ints, py::args args) {
  {
    Building guard(building_);
    auto t0 = std::chrono::steady_clock::now();
    try {
      TrainingPlan plan = plan_training(inputs, runner_with(ints), opts_, min_cut_);
      for (auto& [s, st] : training_sizes_.add(sig, dims, std::move(plan), opts_, &source_)) trainings_[s] = std::move(st);
      if (training_sizes_.builds() && !timings_.contains("training_sizes_build")) timings_["training_sizes_build"] = since(t0);
    } catch (const std::exception& e) {  // py::error_already_set too: the per-size path traces again and reports it
      training_sizes_.give_up(std::string("planning failed: ") + message_of(e));
    }
    size_status_ = training_sizes_.status();
  }
  if (!on_compiled_.is_none()) on_compiled_(this);
  return eager_(*args);
}

// Traces the joint graph at these inputs, partitions it and builds both halves; null (with
// training_status_ saying why) when any step fails.
// `first`: first_of_repeated of the call's arguments, of which `inputs` are the distinct ones.
std::shared_ptr<TrainingStages> CodegenGraph::build_training(const std::vector<at::Tensor>& inputs, const IntArgs& ints, const std::vector<int>& first) {
  Building guard(building_);
  auto t0 = std::chrono::steady_clock::now();
  bridge::GraphRunner run = runner_with(ints);
  if (!first.empty()) {  // the graph's Python form takes every argument: the distinct ones, repeated
    std::vector<int> distinct_of(first.size());
    for (size_t i = 0, k = 0; i < first.size(); ++i) distinct_of[i] = first[i] == static_cast<int>(i) ? static_cast<int>(k++) : distinct_of[first[i]];
    run = [run, distinct_of](const std::vector<at::Tensor>& in) {
      std::vector<at::Tensor> all;
      all.reserve(distinct_of.size());
      for (int k : distinct_of) all.push_back(in.at(k));
      return run(all);
    };
  }
  try {
    TrainingPlan plan = plan_training(inputs, run, opts_, min_cut_);
    std::shared_ptr<TrainingStages> st;
    if (runtime_sizes_ && !opts_.extern_only && first.empty()) st = training_sizes_.from_cache(plan, call_dims(inputs, ints), opts_);
    if (st) {
      size_status_ = training_sizes_.status();
    } else {
      // The backward builds on its first call, unless a debug dump (written now) is to show it.
      st = build_training_stages(std::move(plan), opts_, /*lazy_backward=*/!debug_);
      source_of_training_ = true;
      source_.clear();  // what runtime sizes' kernels add later
    }
    training_status_ = "compiled forward and backward; " + st->describe;
    if (training_builds_) training_status_ += " (" + std::to_string(training_builds_ + 1) + " size signatures built)";
    timings_["training_build"] = since(t0);
    return st;
  } catch (const py::error_already_set& e) {
    training_status_ = std::string("eager: ") + message_of(e);
  } catch (const std::exception& e) {
    training_status_ = std::string("eager: ") + message_of(e);
    if (std::strstr(e.what(), "no output requires grad")) {
      grad_free_ = true;
      training_status_ = "none needed: no output requires grad";
    }
  }
  return nullptr;
}

}  // namespace kiln::python
