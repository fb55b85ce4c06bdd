// Runtime sizes for training graphs: samples, the forward and backward templates, and the pairs
// that share their kernels; see training_sizes.h.
#include "python/codegen_graph/training_sizes.h"

#include <algorithm>
#include <utility>


namespace kiln::python {

namespace {

constexpr size_t kMaxSamples = 8;    // sizes planned without a template before giving up
constexpr size_t kMaxServed = 512;   // sizes the runtime-size kernels serve at most
const std::string kNotePrefix = "training ";  // a cached template's note: a training half's

// Plans of equal keys lowered alike: their layouts and both halves' program shapes are equal.
std::string plan_key(const std::string& layout, const ir::Program& fwd, const ir::Program& bwd) {
  return layout + "\n" + ir::program_ints(fwd).shape + "\n" + ir::program_ints(bwd).shape;
}

}  // namespace

void TrainingSizes::set_base(const std::vector<int64_t>& dims, std::vector<std::string> names, std::shared_ptr<TrainingStages> stages) {
  base_dims_ = dims;
  dim_names_ = std::move(names);
  base_key_ = plan_key(stages_layout(*stages), stages->fwd->program(), stages->backward_program());
  base_ = std::move(stages);
}

bool TrainingSizes::wants(const Signature& sig, const std::vector<int64_t>& dims) const {
  // Each size served keeps its plan (traces, programs): past kMaxServed sizes, new ones run op by op.
  return !off_ && base_ && served_ < kMaxServed && dims.size() == base_dims_.size() && !rejected_.count(sig) && !sampled_.count(sig);
}

std::vector<int64_t> TrainingSizes::symbols_of(const std::vector<int64_t>& dims) const { return ir::symbol_values(symbol_pos_, dims); }

void TrainingSizes::give_up(const std::string& why) {
  off_ = true;
  status_ = "training specialised per size: " + why;
  samples_.clear();
  sampled_.clear();
}

std::string TrainingSizes::served_text() const {
  std::string where;
  for (size_t i = 0; i < symbol_pos_.size(); ++i) where += (i ? ", s" : "s") + std::to_string(i) + " = " + dim_names_.at(symbol_pos_[i]);
  return "training runtime sizes over " + where + ": one forward/backward build serves " + std::to_string(served_ + 1) +
         " size signatures (" + std::to_string(rejected_.size()) + " specialised)";
}

std::shared_ptr<TrainingStages> TrainingSizes::share(TrainingPlan plan, const std::vector<int64_t>& dims, std::string* why) {
  const std::vector<int64_t> sym = symbols_of(dims);
  auto f = runtime::share_sized_kernels(std::move(plan.fwd_trace), std::move(plan.fwd_prog), *fwd_base_, *fwd_template_, sym, why);
  if (!f) return nullptr;
  auto b = runtime::share_sized_kernels(std::move(plan.bwd_trace), std::move(plan.bwd_prog), *bwd_base_, *bwd_template_, sym, why);
  if (!b) return nullptr;
  plan.stages->fwd = std::move(f);
  plan.stages->set_backward(std::move(b), "");
  ++served_;
  return std::move(plan.stages);
}

std::vector<std::pair<TrainingSizes::Signature, std::shared_ptr<TrainingStages>>> TrainingSizes::add(
    const Signature& sig, const std::vector<int64_t>& dims, TrainingPlan plan, const runtime::BuildOptions& opts, std::string* source) {
  if (fwd_template_) {
    std::string why;
    const std::vector<int64_t> sym = symbols_of(dims);
    if (stages_layout(*plan.stages) != layout_) why = "the partition differs";
    else if (!ir::matches(*fwd_template_, ir::program_ints(plan.fwd_prog), sym, &why)) why = "forward: " + why;
    else if (!ir::matches(*bwd_template_, ir::program_ints(plan.bwd_prog), sym, &why)) why = "backward: " + why;
    else if (auto st = share(std::move(plan), dims, &why)) {
      status_ = served_text();
      return {{sig, std::move(st)}};
    }
    rejected_.insert(sig);
    status_ = served_text() + "; last specialised: " + why;
    return {};
  }
  sampled_.insert(sig);
  samples_.push_back({sig, dims, std::move(plan)});
  return fit(opts, source);
}

std::shared_ptr<TrainingStages> TrainingSizes::from_cache(TrainingPlan& plan, const std::vector<int64_t>& dims,
                                                          const runtime::BuildOptions& opts) {
  if (fwd_template_ || off_) return nullptr;
  auto ft = runtime::load_size_template(opts, ir::program_ints(plan.fwd_prog).shape);
  auto bt = ft ? runtime::load_size_template(opts, ir::program_ints(plan.bwd_prog).shape) : std::nullopt;
  if (!bt || ft->second != bt->second || ft->second.compare(0, kNotePrefix.size(), kNotePrefix) != 0) return nullptr;
  std::vector<int> pos;
  size_t ndims = 0;
  if (!ir::parse_symbols_note(ft->second.substr(kNotePrefix.size()), &pos, &ndims) || ndims != dims.size()) return nullptr;
  const std::vector<int64_t> sym = ir::symbol_values(pos, dims);
  std::string why;
  if (!ir::matches(ft->first, ir::program_ints(plan.fwd_prog), sym, &why) || !ir::matches(bt->first, ir::program_ints(plan.bwd_prog), sym, &why))
    return nullptr;
  runtime::BuildResult f, b;
  {
    py::gil_scoped_release nogil;
    f = runtime::build_for_sizes(plan.fwd_trace, plan.fwd_prog, ft->first, sym, opts);
    if (f.graph) b = runtime::build_for_sizes(plan.bwd_trace, plan.bwd_prog, bt->first, sym, opts);
  }
  if (!f.graph || !b.graph) return nullptr;  // the caller builds the plan for its own sizes
  symbol_pos_ = std::move(pos);
  fwd_template_ = std::move(ft->first);
  bwd_template_ = std::move(bt->first);
  layout_ = stages_layout(*plan.stages);
  fwd_base_ = f.graph;
  bwd_base_ = b.graph;
  builds_ = 1;
  std::shared_ptr<TrainingStages> st = plan.stages;
  st->fwd = f.graph;
  st->set_backward(b.graph, b.source);
  status_ = "training runtime sizes: kernels from the cache's size templates";
  return st;
}

// With enough sizes planned: the largest group of plans that lowered alike (the first
// signature's among them), its size symbols, both templates, and their kernels, built from the
// last sample; the group's other samples share them and the rest are specialised.
std::vector<std::pair<TrainingSizes::Signature, std::shared_ptr<TrainingStages>>> TrainingSizes::fit(const runtime::BuildOptions& opts,
                                                                                                     std::string* source) {
  struct Member { const std::vector<int64_t>* dims; const ir::Program* fwd; const ir::Program* bwd; int sample; };  // -1: the base
  std::map<std::string, std::vector<Member>> by_key;
  by_key[base_key_].push_back({&base_dims_, &base_->fwd->program(), &base_->backward_program(), -1});
  std::string last_key;
  for (size_t i = 0; i < samples_.size(); ++i) {
    const TrainingPlan& p = samples_[i].plan;
    last_key = plan_key(stages_layout(*p.stages), p.fwd_prog, p.bwd_prog);
    by_key[last_key].push_back({&samples_[i].dims, &p.fwd_prog, &p.bwd_prog, static_cast<int>(i)});
  }
  const std::string* key = &last_key;
  for (const auto& [k, members] : by_key)
    if (members.size() > by_key[*key].size()) key = &k;
  const std::vector<Member>& group = by_key[*key];
  const std::string sampling = "training runtime sizes: sampling (" + std::to_string(samples_.size() + 1) + " sizes seen)";
  if (group.size() < 3) {
    if (samples_.size() >= kMaxSamples) give_up("no three sizes lower alike (partition, fusion, loop order or memory reuse differ)");
    else status_ = sampling;
    return {};
  }
  std::vector<const std::vector<int64_t>*> dims;
  for (const Member& m : group) dims.push_back(m.dims);
  bool enough = false;
  std::vector<int> pos = ir::symbol_positions(dims, &enough);
  if (!enough && samples_.size() < kMaxSamples) {
    status_ = sampling;
    return {};
  }
  if (pos.empty()) {
    give_up("no size differs between the calls (their strides do)");
    return {};
  }
  symbol_pos_ = pos;
  std::vector<std::vector<int64_t>> syms;
  std::vector<ir::ProgramInts> fwd_ints, bwd_ints;
  for (const Member& m : group) {
    syms.push_back(symbols_of(*m.dims));
    fwd_ints.push_back(ir::program_ints(*m.fwd));
    bwd_ints.push_back(ir::program_ints(*m.bwd));
  }
  std::string why;
  auto ft = ir::fit_template(syms, fwd_ints, &why);
  if (!ft) {
    give_up("forward: " + why);
    return {};
  }
  auto bt = ir::fit_template(syms, bwd_ints, &why);
  if (!bt) {
    give_up("backward: " + why);
    return {};
  }
  // The kernels are generated from the last member; on CUDA from the one whose sizes have the
  // most factors of two (ir::fewest_twos), as for inference graphs.
  int last = group.back().sample;
  if (base_->fwd->on_cuda())
    for (const Member& m : group)
      if (m.sample >= 0 && ir::fewest_twos(symbols_of(*m.dims)) > ir::fewest_twos(symbols_of(samples_.at(static_cast<size_t>(last)).dims)))
        last = m.sample;
  Sample& s = samples_.at(static_cast<size_t>(last));
  const std::vector<int64_t> sym = symbols_of(s.dims);
  runtime::BuildResult f, b;
  {
    py::gil_scoped_release nogil;
    f = runtime::build_for_sizes(std::move(s.plan.fwd_trace), std::move(s.plan.fwd_prog), *ft, sym, opts);
    if (f.graph) b = runtime::build_for_sizes(std::move(s.plan.bwd_trace), std::move(s.plan.bwd_prog), *bt, sym, opts);
  }
  if (!f.graph || !b.graph) {
    give_up("build failed: " + (f.graph ? b.error : f.error));
    return {};
  }
  *source += "// ==== training kernels for runtime sizes: forward ====\n" + f.source + "// ==== backward ====\n" + b.source;
  const std::string note = kNotePrefix + ir::symbols_note(base_dims_.size(), symbol_pos_);
  runtime::store_size_template(opts, *ft, note);
  runtime::store_size_template(opts, *bt, note);
  fwd_template_ = std::move(*ft);
  bwd_template_ = std::move(*bt);
  layout_ = stages_layout(*s.plan.stages);
  fwd_base_ = f.graph;
  bwd_base_ = b.graph;
  builds_ = 1;
  s.plan.stages->fwd = f.graph;
  s.plan.stages->set_backward(b.graph, b.source);
  std::vector<std::pair<Signature, std::shared_ptr<TrainingStages>>> served{{s.sig, s.plan.stages}};
  for (size_t i = 0; i < samples_.size(); ++i) {
    if (static_cast<int>(i) == last) continue;
    bool member = false;
    for (const Member& m : group) member = member || m.sample == static_cast<int>(i);
    std::string why;
    std::shared_ptr<TrainingStages> st = member ? share(std::move(samples_[i].plan), samples_[i].dims, &why) : nullptr;
    if (st) served.emplace_back(samples_[i].sig, std::move(st));
    else rejected_.insert(samples_[i].sig);
  }
  samples_.clear();
  sampled_.clear();
  status_ = served_text();
  return served;
}

}  // namespace kiln::python
