// Runtime sizes for training graphs (issue 10, item 3): a graph with symbolic sizes trained on
// batches of several lengths gets one forward/backward pair of kernels that takes the sizes at
// run time, as CPU inference graphs do (ir/size_template.h, CodegenGraph in codegen_bindings.cpp).
//
// The first size signature is built as usual (build_training_stages). Each new signature is
// traced, partitioned and lowered (plan_training: no code generated; that call runs eagerly) and
// kept as a sample; once three sizes planned alike (equal layouts and equal program shapes for
// both halves, each symbol seen at three values), the forward and the backward are each fitted
// into a template over the same size symbols (positions in the call's sizes) and built once for
// runtime sizes. Every later signature whose plan is the templates' at its sizes runs those
// kernels (CompiledGraph::share_kernels); one that is not, or any signature once no template
// fits, is specialised: the caller builds it on its own. The templates are kept in the kernel
// cache, so that a later process builds nothing at sizes it never saw (from_cache).
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ir/size_template.h"
#include "python/codegen_graph/training_stages.h"

namespace kiln::python {

class TrainingSizes {
 public:
  using Signature = std::vector<int64_t>;

  // The first signature's stages, built on their own, and the call's sizes (a member of every
  // fit) with what each is ("input 0 dim 1").
  void set_base(const std::vector<int64_t>& dims, std::vector<std::string> names, std::shared_ptr<TrainingStages> stages);
  // Whether a call at `sig` (with these sizes) should be planned and handed to add(): a new
  // signature while a template may serve it.
  bool wants(const Signature& sig, const std::vector<int64_t>& dims) const;
  // Sampled, waiting for the template: such a call runs eagerly.
  bool pending(const Signature& sig) const { return sampled_.count(sig) > 0; }
  // A new signature's plan. Returns the signatures the runtime-size kernels serve from now on,
  // with their stages (this one, or every member when this sample completed a fit); none when
  // it was kept as a sample or is specialised (specialised() then says so).
  std::vector<std::pair<Signature, std::shared_ptr<TrainingStages>>> add(const Signature& sig, const std::vector<int64_t>& dims,
                                                                         TrainingPlan plan, const runtime::BuildOptions& opts,
                                                                         std::string* source);
  // The stages of a plan the size templates in the kernel cache serve (an earlier process fitted
  // them), with their cached kernels: no build at a size never seen. From then on those templates
  // serve later sizes too, and the result is plan.stages with its graphs set. Null, the plan
  // untouched, where the cache has none for it.
  std::shared_ptr<TrainingStages> from_cache(TrainingPlan& plan, const std::vector<int64_t>& dims, const runtime::BuildOptions& opts);
  bool specialised(const Signature& sig) const { return off_ || rejected_.count(sig) > 0; }
  void give_up(const std::string& why);
  const std::string& status() const { return status_; }
  size_t builds() const { return builds_; }
  size_t served() const { return served_; }

 private:
  struct Sample {
    Signature sig;
    std::vector<int64_t> dims;
    TrainingPlan plan;
  };
  std::vector<int64_t> symbols_of(const std::vector<int64_t>& dims) const;
  // The plan's stages running the template's kernels; null (`why` set) where they do not serve it.
  std::shared_ptr<TrainingStages> share(TrainingPlan plan, const std::vector<int64_t>& dims, std::string* why);
  std::vector<std::pair<Signature, std::shared_ptr<TrainingStages>>> fit(const runtime::BuildOptions& opts, std::string* source);
  std::string served_text() const;

  std::vector<int64_t> base_dims_;
  std::vector<std::string> dim_names_;
  std::shared_ptr<TrainingStages> base_;
  std::string base_key_;
  std::vector<Sample> samples_;
  std::set<Signature> sampled_, rejected_;
  std::vector<int> symbol_pos_;
  std::optional<ir::SizeTemplate> fwd_template_, bwd_template_;
  std::string layout_;
  std::shared_ptr<runtime::CompiledGraph> fwd_base_, bwd_base_;  // own the kernels for runtime sizes
  bool off_ = false;
  size_t builds_ = 0, served_ = 0;
  std::string status_;
};

}  // namespace kiln::python
