// CodegenGraph at sizes other than its first call's (see codegen_graph.h): one specialisation per
// size signature, or, once three sizes are seen, kernels that take the sizes at run time
// (ir/size_template.h) fitted over the sizes traced so far.
#include "python/codegen_graph/codegen_graph.h"

namespace kiln::python {

// Every tensor input's sizes and every int input's value, flattened (positions line up between
// calls whose inputs have the same ranks).
std::vector<int64_t> CodegenGraph::call_dims(const std::vector<at::Tensor>& inputs, const IntArgs& ints) {
  std::vector<int64_t> d;
  for (const auto& [pos, v] : ints) d.push_back(v);
  for (const auto& t : inputs)
    for (int64_t i = 0; i < t.dim(); ++i) d.push_back(t.size(i));
  return d;
}

// What each position of call_dims is: "int input 2", "input 0 dim 1".
std::vector<std::string> CodegenGraph::call_dim_names(const std::vector<at::Tensor>& inputs, const IntArgs& ints) {
  std::vector<std::string> names;
  for (const auto& [pos, v] : ints) names.push_back("int input " + std::to_string(pos));
  for (size_t i = 0; i < inputs.size(); ++i)
    for (int64_t d = 0; d < inputs[i].dim(); ++d) names.push_back("input " + std::to_string(i) + " dim " + std::to_string(d));
  return names;
}

bool CodegenGraph::same_layout(const std::vector<at::Tensor>& inputs, const IntArgs& ints) const {
  if (ints.size() != int_args_.size() || inputs.size() != base_ranks_.size()) return false;
  for (size_t i = 0; i < ints.size(); ++i)
    if (ints[i].first != int_args_[i].first) return false;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].dim() != base_ranks_[i]) return false;
  return true;
}

// A size the runtime-size kernels now serve was traced on this call (an eager run: its result),
// so its first compiled run would be its next call, and on CUDA that run pays what a process
// pays once per shape: the bias+GELU epilogue matmuls (_addmm_activation, which the traced run
// never calls) wait 7-11 ms in cuBLASLt at their first call at a new M (seen on an H200 at
// dyn_seq's lengths 256-448; 0.2 ms at longer ones). The bench's timed round over dyn_seq's 16
// lengths, the second call at 13 of them, took 5.45 ms a call (inductor 5.10); 3.59 with this
// (inductor 5.24, same machine). The compiled graph (kernels and extern calls) runs once here,
// on this call's inputs, its outputs discarded, where a run may be repeated
// (CompiledGraph::rerunnable); a run that fails leaves the size to its own specialisation. CPU
// graphs are not run twice: nothing of that size waits there, and their first call would pay
// the whole run again.
void CodegenGraph::first_sized_run(const std::vector<int64_t>& sig, const std::vector<at::Tensor>& inputs) {
  auto it = sized_.find(sig);
  // CUDA inputs: a program of extern calls alone (an MLP's matmuls) has no kernels of kiln's.
  const bool cuda = std::any_of(inputs.begin(), inputs.end(), [](const at::Tensor& t) { return t.defined() && t.is_cuda(); });
  if (it == sized_.end() || !cuda || !it->second->rerunnable()) return;
  try {
    py::gil_scoped_release nogil;
    it->second->run(inputs);
  } catch (const std::exception& e) {
    sized_.erase(it);
    rejected_.emplace(sig, 1);
    size_status_ = std::string("runtime sizes: a size's first run failed (") + e.what() + "), specialised; " + served_text();
    return;
  }
  ++sizes_run_at_first_call_;
}

// With enough sizes sampled: the programs that lowered alike (the largest group of equal
// shapes: a size where lowering decided otherwise, a coincidence of sizes that fused other
// loops, is left to its own specialisation), the size symbols (the positions whose sizes differ
// within the group, one symbol per set of positions that always agree), the template, and its
// kernels. The first call's program is a member like any other, served by its own kernels.
void CodegenGraph::fit_sizes() {
  struct Member { const std::vector<int64_t>* dims; const ir::Program* prog; int sample; };  // sample -1: the first call
  std::map<std::string, std::vector<Member>> by_shape;
  std::string last_shape;
  by_shape[ir::program_ints(graph_->program()).shape].push_back({&base_dims_, &graph_->program(), -1});
  for (size_t i = 0; i < samples_.size(); ++i) {
    last_shape = ir::program_ints(samples_[i].prog).shape;
    by_shape[last_shape].push_back({&samples_[i].dims, &samples_[i].prog, static_cast<int>(i)});
  }
  const std::vector<Member>* group = &by_shape[last_shape];
  for (const auto& [shape, members] : by_shape)
    if (members.size() > group->size()) group = &members;
  constexpr size_t kMaxSamples = 8;  // sizes traced without a template before giving up
  if (group->size() < 3) {
    if (samples_.size() >= kMaxSamples) return give_up_sizes("no three sizes lower alike (fusion, loop order, simplification or memory reuse differ)");
    size_status_ = "runtime sizes: sampling (" + std::to_string(samples_.size() + 1) + " sizes seen)";
    return;
  }
  std::vector<const std::vector<int64_t>*> dims;
  for (const Member& m : *group) dims.push_back(m.dims);
  bool enough = false;
  std::vector<int> pos = ir::symbol_positions(dims, &enough);
  if (!enough && samples_.size() < kMaxSamples) {
    size_status_ = "runtime sizes: sampling (" + std::to_string(samples_.size() + 1) + " sizes seen)";
    return;
  }
  symbol_pos_ = pos;
  std::vector<std::vector<int64_t>> syms;
  std::vector<ir::ProgramInts> ints;
  for (const Member& m : *group) {
    syms.push_back(symbols_of(*m.dims));
    ints.push_back(ir::program_ints(*m.prog));
  }
  std::string why;
  auto t = ir::fit_template(syms, ints, &why);
  if (!t) return give_up_sizes(why);
  std::vector<int> members;
  for (const Member& m : *group)
    if (m.sample >= 0) members.push_back(m.sample);
  // The kernels are generated from the member whose sizes have the most factors of two (the
  // last of equals): CUDA's vector accesses over a runtime-size stride are generated where the
  // sample allows them, and serve the sizes that allow them too.
  auto twos = [&](int i) { return ir::fewest_twos(symbols_of(samples_[i].dims)); };
  if (graph_->on_cuda()) std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return twos(a) < twos(b); });
  auto t0 = std::chrono::steady_clock::now();
  Sample& last = samples_.at(members.back());
  runtime::BuildResult r;
  {
    py::gil_scoped_release nogil;
    r = runtime::build_for_sizes(std::move(last.trace), std::move(last.prog), *t, symbols_of(last.dims), opts_);
  }
  if (!r.graph) return give_up_sizes("build failed: " + r.error);
  template_ = std::move(*t);
  ++size_builds_;
  timings_["runtime_sizes_build"] = since(t0);
  source_of_training_ = false;
  source_ += "// ==== kernels for runtime sizes (" + served_text() + ") ====\n" + r.source;
  runtime::store_size_template(opts_, *template_, ir::symbols_note(base_dims_.size(), symbol_pos_));
  sized_base_ = r.graph;
  sized_base_sig_ = last.sig;
  sized_[last.sig] = r.graph;
  for (size_t i = 0; i < samples_.size(); ++i) {
    Sample& s = samples_[i];
    if (static_cast<int>(i) == members.back()) continue;
    if (std::find(members.begin(), members.end(), static_cast<int>(i)) == members.end()) rejected_.emplace(s.sig, 1);
    else if (std::string why; !add_sized(s.sig, std::move(s.trace), std::move(s.prog), symbols_of(s.dims), &why)) rejected_.emplace(s.sig, 1);
  }
  samples_.clear();
  size_status_ = served_text();
  if (!on_compiled_.is_none()) on_compiled_(this);
}

// False (`why` set) where the shared CUDA kernels do not serve this program's sizes
// (CompiledGraph::share_kernels): it is then specialised.
bool CodegenGraph::add_sized(const std::vector<int64_t>& sig, bridge::TraceResult tr, ir::Program prog, std::vector<int64_t> sym, std::string* why) {
  // Each size keeps its program and extern-call arguments: a graph called at ever new sizes (a
  // cache growing forever) forgets the oldest, which is checked again if it comes back.
  constexpr size_t kMaxSizes = 512;
  if (sized_.size() >= kMaxSizes && !sized_order_.empty()) {
    if (sized_order_.front() != sized_base_sig_) sized_.erase(sized_order_.front());
    sized_order_.pop_front();
  }
  auto g = runtime::share_sized_kernels(std::move(tr), std::move(prog), *sized_base_, *template_, std::move(sym), why);
  if (!g) return false;
  sized_[sig] = std::move(g);
  sized_order_.push_back(sig);
  size_status_ = served_text();
  return true;
}

// Seconds a new size signature spent in one stage (`key`), summed over signatures in timings(),
// with `t0` moved on to now: where a graph's calls at new sizes go (trace, lower, share, run).
void CodegenGraph::add_size_time(const char* key, std::chrono::steady_clock::time_point& t0) {
  const double s = since(t0);
  t0 = std::chrono::steady_clock::now();
  py::object prev = timings_.contains(key) ? py::object(timings_[key]) : py::float_(0.0);
  timings_[key] = prev.cast<double>() + s;
}

std::string CodegenGraph::sizes_text(const std::vector<int64_t>& sym) const {
  std::string s;
  for (size_t i = 0; i < sym.size(); ++i) s += (i ? ", s" : "s") + std::to_string(i) + "=" + std::to_string(sym[i]);
  return s;
}

std::string CodegenGraph::served_text() const {
  std::string where;
  for (size_t i = 0; i < symbol_pos_.size(); ++i) where += (i ? ", " : "") + std::string("s") + std::to_string(i) + " = " + dim_name(symbol_pos_[i]);
  return "runtime sizes: " + std::to_string(template_ ? template_->num_symbolic : 0) + " symbolic integers over " + where + "; one build serves " +
         std::to_string(sized_.size() + 1) + " size signatures (" + std::to_string(rejected_.size()) + " specialised)";
}

// "input 0 dim 1" or "int input 2" for a position of call_dims.
std::string CodegenGraph::dim_name(int pos) const {
  if (pos < static_cast<int>(int_args_.size())) return "int input " + std::to_string(int_args_[pos].first);
  int p = pos - static_cast<int>(int_args_.size());
  int input = 0;
  while (input < static_cast<int>(base_ranks_.size()) && p >= base_ranks_[input]) p -= base_ranks_[input++];
  return "input " + std::to_string(input) + " dim " + std::to_string(p);
}

void CodegenGraph::give_up_sizes(const std::string& why) {
  sizes_off_ = true;
  size_status_ = "specialised per size: " + why;
  for (Sample& s : samples_) rejected_.emplace(s.sig, 1);
  samples_.clear();
  if (!on_compiled_.is_none()) on_compiled_(this);
}

py::object CodegenGraph::run_sized(runtime::CompiledGraph& g, const std::vector<at::Tensor>& inputs, py::args args) {
  std::vector<at::Tensor> outs;
  try {
    py::gil_scoped_release nogil;
    outs = g.run(inputs);
  } catch (const runtime::KernelCheckFailed& e) {
    return decline(e.what(), args);
  } catch (const runtime::InputMismatch& e) {
    return decline(e.what(), args);
  }
  return pack(outs);
}

py::object CodegenGraph::other_sizes(std::vector<int64_t> sig, const std::vector<at::Tensor>& inputs, const IntArgs& ints, py::args args) {
  auto sized = sized_.find(sig);
  if (sized != sized_.end()) return run_sized(*sized->second, inputs, args);
  for (auto& [s, g] : variants_)
    if (s == sig) return g->call(args);
  if (auto r = runtime_sizes(sig, inputs, ints, args)) return *r;
  // No kernels for these sizes and no room for more: the graph runs op by op (an exception
  // it raises makes the frame rerun eagerly, as for any graph).
  if (static_cast<int>(variants_.size()) >= variant_limit()) return eager_(*args);
  // A size the runtime-size kernels do not serve (lowering decided its kernels otherwise, as
  // where a length equals a head dimension and other loops fuse) runs op by op until it is
  // called a third time, then gets its own build, on a background thread: a size seen once
  // compiles nothing, and the other sizes keep running while one compiles.
  if (template_) {
    auto rejected = rejected_.find(sig);
    if (rejected != rejected_.end() && ++rejected->second < 3) return eager_(*args);
  }
  const bool background = background_ || template_.has_value();
  auto g = std::make_unique<CodegenGraph>(eager_, opts_.cache_dir, on_compiled_, opts_.fuse, background, opts_.jobs, frontend_, 0, min_cut_,
                                          opts_.extern_only, enables_grad_, debug_, opts_.autotune, runtime_sizes_);
  variants_.emplace_back(std::move(sig), std::move(g));
  return variants_.back().second->call(args);
}

}  // namespace kiln::python
