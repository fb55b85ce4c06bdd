// The compiled-graph callable that backend="kiln" and kiln.backend hand back (private to
// csrc/python): CodegenGraph. Members are defined in codegen_graph.cpp (calls, the first call's
// trace and build, fallbacks, texts), codegen_graph_sizes.cpp (other sizes: specialisations and
// kernels that take the sizes at run time) and codegen_graph_training.cpp (calls with autograd:
// the forward/backward pairs of training_stages.h); codegen_bindings.cpp binds it.
#pragma once
#include <ATen/SavedTensorHooks.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/autograd/python_variable.h>

#include <ATen/MemoryOverlap.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "lowering/lowerer.h"
#include "python/codegen_graph/training_sizes.h"
#include "python/codegen_graph/training_stages.h"
#include "frontend/hook/frame_dispatch.h"
#include "runtime/compiled_graph.h"
#include "runtime/output_views.h"
#include "runtime/graph_build.h"
#include "torch_bridge/channels_last.h"
#include "torch_bridge/tracer.h"

namespace kiln::python {

namespace py = pybind11;

// A call's int inputs: (argument position, value).
using IntArgs = std::vector<std::pair<size_t, int64_t>>;

// Helpers of codegen_bindings.cpp that CodegenGraph's members use.
std::string message_of(const std::exception& e);
bridge::GraphRunner python_runner(py::object fn);
double since(std::chrono::steady_clock::time_point t0);
bool output_views_a_mutated_input(const ir::AtenGraph& g);
bool debugger_attached();
std::vector<int64_t> size_signature(const std::vector<at::Tensor>& inputs, const IntArgs& ints);
std::vector<int> first_of_repeated(const std::vector<at::Tensor>& inputs);

// The callable handed back for a graph. The first call (without autograd) traces the graph on
// its real inputs, which also produces that call's results; then the graph is built (lowered,
// generated, compiled or loaded from the cache) with the GIL released, or on a background thread
// while calls keep running eagerly. Anything that fails makes this graph run eagerly from then
// on, with the reason kept in `status`.
//
// A graph with symbolic dimensions is called with inputs of many sizes. Automatic dynamic at the
// code generator (CPU inference): a call at a new size signature is traced (the traced run is
// its result) and lowered; once three sizes have been seen, the dimensions whose sizes differ
// become size symbols and the programs are fitted into one template (ir/size_template.h) whose
// kernels take the sizes at run time: one build serves every size whose own lowering is the
// template's at that size (checked at its first call, which is traced). Where no template fits
// (lowering decided differently at some size, an integer that is no polynomial of the sizes, a
// CUDA graph) the graph keeps one specialisation per size signature, with the reason in
// `size_status`: the first `max_variants` get their own build; calls at other sizes run the
// graph op by op.
class CodegenGraph {
 public:
  CodegenGraph(py::object eager, std::string cache_dir, py::object on_compiled, bool fuse, bool background, int jobs, bool frontend,
               int max_variants = 8, bool min_cut = true, bool extern_only = false, bool enables_grad = false, bool debug = false, bool autotune = false,
               bool runtime_sizes = true)
      : eager_(std::move(eager)), on_compiled_(std::move(on_compiled)), background_(background), frontend_(frontend),
        max_variants_(max_variants), min_cut_(min_cut), enables_grad_(enables_grad), debug_(debug), runtime_sizes_(runtime_sizes) {
    if (!runtime_sizes_) sizes_off_ = true, size_status_ = "runtime sizes off (option runtime_sizes)";
    opts_.cache_dir = std::move(cache_dir);
    opts_.fuse = fuse;
    opts_.extern_only = extern_only;
    opts_.jobs = jobs;
    opts_.autotune = autotune;
  }
  ~CodegenGraph() {
    // The builder may release tensors whose Python objects need the GIL.
    py::gil_scoped_release nogil;
    pending_.reset();
  }

  py::object call(py::args args);
  void wait();
  std::string status() const { return status_; }
  // A text of both halves of a training graph, headed "# forward" and "# backward".
  // The backward's text says so until its first call builds it.
  template <class TextOf>
  std::string training_text(TextOf text_of) const {
    std::shared_ptr<runtime::CompiledGraph> bwd = training_->backward_if_built();
    return "# forward\n" + text_of(*training_->fwd) + "# backward\n" + (bwd ? text_of(*bwd) : std::string("# built on the first backward call\n"));
  }
  std::string graph_text() const;
  std::string program_text() const;
  std::string unfused_program_text() const;
  std::string source() const { return source_of_training_ && training_ ? training_->source() + source_ : source_; }
  py::dict timings() const;
  bool compiled() const { return state_ == kReady; }
  size_t num_kernels() const { return graph_ ? graph_->num_kernels() : 0; }
  size_t num_externs() const { return graph_ ? graph_->num_externs() : 0; }
  size_t num_specializations() const { return variants_.size() + (training_builds_ > 1 ? training_builds_ - 1 : 0); }
  // Runtime sizes: how this graph serves sizes other than its first call's (see the class comment).
  std::string size_status() const { return size_status_; }
  size_t num_size_builds() const { return size_builds_ + training_sizes_.builds(); }  // kernel sets built (or loaded) for runtime sizes
  size_t num_sizes_served() const { return sized_.size() + training_sizes_.served(); }  // size signatures those kernels run
  size_t num_sizes_run_at_first_call() const { return sizes_run_at_first_call_; }  // see first_sized_run
  bool capturable() const;
  py::tuple run_for_capture(py::args args);
  std::string training_status() const { return training_status_; }
  std::string autotune_status() const { return autotune_status_; }

 private:
  enum State { kNew, kCompiling, kReady, kEager };
  runtime::BuildResult build_first(bridge::TraceResult tr);
  static std::vector<int64_t> call_dims(const std::vector<at::Tensor>& inputs, const IntArgs& ints);
  static std::vector<std::string> call_dim_names(const std::vector<at::Tensor>& inputs, const IntArgs& ints);
  bool same_layout(const std::vector<at::Tensor>& inputs, const IntArgs& ints) const;
  std::vector<int64_t> symbols_of(const std::vector<int64_t>& dims) const { return ir::symbol_values(symbol_pos_, dims); }

  std::optional<py::object> runtime_sizes(const std::vector<int64_t>& sig, const std::vector<at::Tensor>& inputs, const IntArgs& ints,
                                          py::args args);
  void first_sized_run(const std::vector<int64_t>& sig, const std::vector<at::Tensor>& inputs);
  void fit_sizes();
  bool add_sized(const std::vector<int64_t>& sig, bridge::TraceResult tr, ir::Program prog, std::vector<int64_t> sym, std::string* why);
  void add_size_time(const char* key, std::chrono::steady_clock::time_point& t0);
  std::string sizes_text(const std::vector<int64_t>& sym) const;
  std::string served_text() const;
  std::string dim_name(int pos) const;
  void give_up_sizes(const std::string& why);
  py::object run_sized(runtime::CompiledGraph& g, const std::vector<at::Tensor>& inputs, py::args args);
  py::object other_sizes(std::vector<int64_t> sig, const std::vector<at::Tensor>& inputs, const IntArgs& ints, py::args args);

  // How many size signatures get kernels of their own. An NVRTC build is cheap next to a C++
  // compile: CUDA graphs get four times the option's number (sizes the runtime-size kernels do
  // not serve, such as odd lengths where vector code differs, still compile rather than run op by op).
  int variant_limit() const { return opts_.cuda_device >= 0 ? 4 * max_variants_ : max_variants_; }

  py::object fall_back(const std::string& why, py::args args);
  py::object decline(const std::string& why, py::args args);
  py::object pack(const std::vector<at::Tensor>& outs);
  void finish(runtime::BuildResult r);

  // Runs the graph's Python form on tensors from C++ (with this graph's int inputs put back),
  // noting how it returns its results.
  bridge::GraphRunner runner() { return runner_with(int_args_); }
  bridge::GraphRunner runner_with(const IntArgs& ints);
  py::object training_call(const std::vector<at::Tensor>& all_inputs, const IntArgs& ints, py::args args);
  py::object run_pair(const std::shared_ptr<TrainingStages>& st, const std::vector<at::Tensor>& inputs, py::args args);
  py::object training_sample(std::vector<int64_t> sig, const std::vector<int64_t>& dims, const std::vector<at::Tensor>& inputs,
                             const IntArgs& ints, py::args args);
  std::shared_ptr<TrainingStages> build_training(const std::vector<at::Tensor>& inputs, const IntArgs& ints, const std::vector<int>& first);
  py::object first_call(const std::vector<at::Tensor>& inputs, py::args args);

  py::object eager_;
  py::object on_compiled_;
  runtime::BuildOptions opts_;
  bool background_ = false;
  State state_ = kNew;
  std::string status_ = "not compiled yet";
  std::string trace_text_, source_;
  bool source_of_training_ = false;  // source() is the training pair's (training_->source()), then source_
  double trace_s_ = 0;
  py::dict timings_;
  std::unique_ptr<runtime::BackgroundBuild> pending_;
  std::shared_ptr<runtime::CompiledGraph> graph_;
  bool single_ = false, as_list_ = false;
  bool frontend_ = false;   // called by kiln's frontend, which can run the frame eagerly instead
  int trace_failures_ = 0;
  int max_variants_ = 8;
  bool min_cut_ = true;  // the partitioner for training graphs (else save everything the backward reads)
  bool enables_grad_ = false;  // the graph has a set_grad_enabled(True) node
  bool debug_ = false;         // compiled with a debug dump on: a tracing debugger runs the Python form
  bool building_ = false;  // a thread is in first_call / the training build (set and read under the GIL)
  struct Building {
    bool& flag;
    explicit Building(bool& f) : flag(f) { flag = true; }
    ~Building() { flag = false; }
  };
  std::shared_ptr<TrainingStages> training_;  // the last pair built (what program_text shows)
  std::map<std::vector<int64_t>, std::shared_ptr<TrainingStages>> trainings_;  // per size signature (null: eager)
  int training_builds_ = 0;         // pairs built for one size signature each
  TrainingSizes training_sizes_;    // the pair whose kernels take the sizes at run time
  bool training_failed_ = false;    // a build failed: every training call runs op by op
  std::string training_status_;     // empty until the first training call
  bool grad_free_ = false;          // inputs require grad but no output does: inference program
  std::string autotune_status_;     // mode="max-autotune": each kernel's chosen configuration
  std::vector<int64_t> signature_;  // of the call that traced this graph
  IntArgs int_args_;                // its int inputs, baked into the trace
  std::vector<std::pair<std::vector<int64_t>, std::unique_ptr<CodegenGraph>>> variants_;
  // Runtime sizes (see the class comment).
  struct Sample {
    std::vector<int64_t> sig, dims;
    bridge::TraceResult trace;
    ir::Program prog;
  };
  std::vector<int64_t> base_dims_;          // call_dims of the first call
  std::vector<int> base_ranks_;             // its tensor inputs' ranks
  std::vector<Sample> samples_;             // sizes traced before the template exists
  std::vector<int> symbol_pos_;             // per size symbol: its position in call_dims
  std::optional<ir::SizeTemplate> template_;
  std::shared_ptr<runtime::CompiledGraph> sized_base_;  // owns the kernels for runtime sizes
  std::map<std::vector<int64_t>, std::shared_ptr<runtime::CompiledGraph>> sized_;  // by size signature
  std::deque<std::vector<int64_t>> sized_order_;  // in the order they were added
  std::vector<int64_t> sized_base_sig_;
  std::map<std::vector<int64_t>, int> rejected_;  // size signatures the template does not serve -> calls
  bool runtime_sizes_ = true;                // the option: kernels for runtime sizes at all
  bool sizes_off_ = false;                   // no template: every size is specialised
  size_t size_builds_ = 0;
  size_t sizes_run_at_first_call_ = 0;
  std::string size_status_;
};

}  // namespace kiln::python
