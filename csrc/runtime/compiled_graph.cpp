// The CompiledGraph runtime; see compiled_graph.h.
#include "runtime/compiled_graph.h"

#include <c10/core/GradMode.h>

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <dlfcn.h>

#include <optional>
#include <set>
#include <stdexcept>
#include <string>

#include "runtime/cpp_compiler.h"

namespace kiln::runtime {
using namespace ir;

// The tune file: "kernel choice" lines (read back by graph_build.cpp). A cache that cannot be
// written costs a retune in the next process, nothing else.
static void store_tune_file(const std::string& path, const std::string& text, size_t) {
  auto slash = path.rfind('/');
  if (slash != std::string::npos && make_dirs(path.substr(0, slash))) store_verified(path, text);
}

CompiledGraph::CompiledGraph(bridge::TraceResult trace, Program program) : trace_(std::move(trace)), program_(std::move(program)) {
  ops_.resize(trace_.graph.nodes.size());
  for (const Step& s : program_.steps) {
    if (s.kind != Step::kExtern) continue;
    const std::string& name = trace_.graph.nodes[s.node].op;
    auto dot = name.find('.');
    ops_[s.node] = c10::Dispatcher::singleton().findSchemaOrThrow(name.substr(0, dot).c_str(), dot == std::string::npos ? "" : name.substr(dot + 1).c_str());
  }
  kernel_outputs_ = kernel_allocations(program_);
  for (const AtenValue& v : trace_.graph.values)
    if (v.kind == AtenValue::kInput) {
      if (input_on_cpu_.size() <= static_cast<size_t>(v.index)) input_on_cpu_.resize(v.index + 1, true);
      input_on_cpu_[v.index] = v.meta.cpu;
    }
  donee_.assign(program_.buffers.size(), -1);
  for (size_t b = 0; b < program_.reuse_of.size(); ++b)
    if (program_.reuse_of[b] >= 0) donee_[program_.reuse_of[b]] = static_cast<int>(b);
  plan_fast_views();
  name_kernels();
}

// Each kernel's name in torch.profiler's tables and traces: "kiln::kernel3 (add, native_layer_norm)",
// the ATen operators it computes in graph order, each once (extern calls are recorded by the
// dispatcher under their own names).
void CompiledGraph::name_kernels() {
  for (size_t k = 0; k < program_.kernels.size(); ++k) {
    std::string ops;
    std::set<std::string> seen;
    for (const std::string& label : program_.kernels[k].fused) {
      auto colon = label.find("::");
      std::string op = colon == std::string::npos ? label : label.substr(colon + 2);
      if (auto dot = op.find('.'); dot != std::string::npos) op.resize(dot);
      if (seen.insert(op).second) ops += (ops.empty() ? "" : ", ") + op;
    }
    kernel_names_.push_back("kiln::kernel" + std::to_string(k) + (ops.empty() ? "" : " (" + ops + ")"));
  }
}

CompiledGraph::~CompiledGraph() {
  // The library stays loaded: kernels may be cached elsewhere and unloading buys nothing.
}

size_t CompiledGraph::num_externs() const {
  size_t n = 0;
  for (const Step& s : program_.steps) n += s.kind == Step::kExtern;
  return n;
}

bool CompiledGraph::load(const std::string& library, std::string* error) {
  handle_ = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle_) {
    *error = std::string("cannot load ") + library + ": " + dlerror();
    return false;
  }
  for (const Kernel& k : program_.kernels) {
    auto fn = reinterpret_cast<void (*)(void**)>(dlsym(handle_, k.name.c_str()));
    if (!fn) {
      *error = "kernel " + k.name + " missing from " + library;
      return false;
    }
    kernels_.push_back(fn);
  }
  return true;
}

bool CompiledGraph::share_kernels(const CompiledGraph& base, std::vector<int64_t> symbols, const codegen::CudaSizes* sizes, std::string* why) {
#ifdef KILN_WITH_CUDA
  if (base.cuda_) {
    std::string reason;
    if (!sizes) reason = "CUDA kernels are shared only with this program's size spelling";
    auto launches = sizes ? codegen::cuda_sized_launches(base.cuda_->defaults(), program_, *sizes, &reason) : std::nullopt;
    if (!launches) {
      if (why) *why = reason;
      return false;
    }
    sized_launches_ = std::move(*launches);
    use_cuda(base.cuda_, base.cuda_->device());
  }
#else
  (void)sizes, (void)why;
#endif
  if (!cuda_ && !base.device_.is_cpu()) use_device(base.device_.index());
  handle_ = base.handle_;
  kernels_ = base.kernels_;
  symbols_ = std::move(symbols);
  return true;
}

void CompiledGraph::use_cuda(std::shared_ptr<CudaKernels> kernels, int device) {
  cuda_ = std::move(kernels);
  use_device(device);
}

void CompiledGraph::use_device(int device) {
  device_ = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(device));
  plan_fast_views();
}

// Extern view operators whose sizes and strides follow from their input's traced layout alone
// are made directly as aliases of their input's storage (about 1 us each through the dispatcher,
// a few dozen per transformer call). A view that leaves the graph, itself or through a view of
// it (an output keeps the dispatcher's view, with its autograd view tracking and shared version
// counter), goes through the dispatcher.
void CompiledGraph::plan_fast_views() {
  static const std::set<std::string> kViews = {"aten::view", "aten::_unsafe_view", "aten::t", "aten::transpose.int", "aten::expand",
                                               "aten::permute", "aten::unsqueeze", "aten::squeeze.dim", "aten::alias",
                                               "aten::slice.Tensor", "aten::select.int"};
  std::set<int> escaping(program_.outputs.begin(), program_.outputs.end());
  for (auto [input, b] : program_.input_mutations) escaping.insert(b);
  // An extern whose result aliases its arguments passes escape on to them.
  for (size_t si = program_.steps.size(); si-- > 0;) {
    const Step& s = program_.steps[si];
    if (s.kind != Step::kExtern || !ops_[s.node]) continue;
    bool escapes = false;
    for (int o : s.outputs) escapes = escapes || (o >= 0 && escaping.count(o));
    if (!escapes) continue;
    bool aliases = false;
    for (const auto& r : ops_[s.node]->schema().returns()) aliases = aliases || r.alias_info() != nullptr;
    if (aliases)
      for (int a : s.args)
        if (a >= 0) escaping.insert(a);
  }
  const bool on_cpu = device_.is_cpu();
  fast_views_.assign(program_.steps.size(), std::nullopt);
  for (size_t si = 0; si < program_.steps.size(); ++si) {
    const Step& s = program_.steps[si];
    if (s.kind != Step::kExtern || s.outputs.size() != 1 || s.outputs[0] < 0 || escaping.count(s.outputs[0]) || s.args.empty() || s.args[0] < 0)
      continue;
    const AtenNode& node = trace_.graph.nodes[s.node];
    if (!kViews.count(node.op) || node.outputs.size() != 1 || node.outputs[0] < 0 || node.args.empty() ||
        node.args[0].kind != AtenArg::kTensor)
      continue;
    const TensorMeta& in = trace_.graph.values[node.args[0].value].meta;
    const TensorMeta& out = trace_.graph.values[node.outputs[0]].meta;
    if (in.cpu != on_cpu || out.cpu != on_cpu || in.dtype != out.dtype || out.sizes.size() != out.strides.size()) continue;
    fast_views_[si] = FastView{s.args[0], s.outputs[0], out.sizes, out.strides, out.storage_offset - in.storage_offset};
  }
}

// The kernels index an input with the traced sizes and strides (a stride matters only where its
// size exceeds 1), on the traced device: the graph's CUDA device, or the CPU.
// Compared in kiln's types: a complex input (a training graph's saved rfft, read by extern calls
// only) was traced as DType::kUnknown, like every type generated code cannot compute on.
static bool matches(const Buffer& buf, const at::Tensor& t, const c10::Device& device) {
  if (!t.defined() || t.device() != device || ir::dtype_from_int(static_cast<int>(t.scalar_type())) != buf.dtype ||
      t.dim() != static_cast<int64_t>(buf.sizes.size()))
    return false;
  const bool empty = t.numel() == 0;  // no element to address: any strides will do
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.size(d) != buf.sizes[d] || (!empty && buf.sizes[d] > 1 && t.stride(d) != buf.strides[d])) return false;
  return true;
}

std::vector<at::Tensor> CompiledGraph::run(const std::vector<at::Tensor>& inputs, at::Tensor* device_flag) {
  return run_steps(inputs, device_flag, false);
}

std::string CompiledGraph::autotune(const std::vector<at::Tensor>& inputs) {
  if (!cuda_ || cuda_->tune_path.empty()) return "not autotuned (no CUDA kernels)";
  if (!cuda_->needs_tuning) return "tuned choices loaded from " + cuda_->tune_path;
  // A run draws no random numbers twice: graphs with random operators keep the defaults.
  if (std::string op = random_operator(); !op.empty()) {
    cuda_->needs_tuning = false;
    return "not autotuned: the graph draws random numbers (" + op + ")";
  }
  std::vector<at::Tensor> copies;
  for (const at::Tensor& t : inputs) copies.push_back(t.defined() ? t.clone(at::MemoryFormat::Preserve) : t);
  run_steps(copies, nullptr, true);
  std::string text, file;
  for (size_t k = 0; k < cuda_->size(); ++k) {
    const int c = cuda_->choice(static_cast<int>(k));
    text += (k ? "; " : "") + cuda_->name(static_cast<int>(k)) + ": " + cuda_->configuration(static_cast<int>(k), c);
    file += std::to_string(k) + " " + std::to_string(c) + "\n";
  }
  cuda_->needs_tuning = false;
  store_tune_file(cuda_->tune_path, file, cuda_->size());
  return text;
}

std::string CompiledGraph::random_operator() const {
  for (const AtenNode& n : trace_.graph.nodes)
    for (const char* r : {"rand", "dropout", "bernoulli", "normal", "uniform", "multinomial", "exponential", "geometric", "cauchy"})
      if (n.op.find(r) != std::string::npos) return n.op;
  return "";
}

bool CompiledGraph::rerunnable() const {
  if (!program_.input_mutations.empty() || !trace_.graph.input_mutations.empty() || !random_operator().empty()) return false;
  for (const AtenNode& n : trace_.graph.nodes)
    if (n.op.rfind("aten::", 0) != 0) return false;
  return true;
}

std::vector<at::Tensor> CompiledGraph::run_steps(const std::vector<at::Tensor>& inputs, at::Tensor* device_flag, bool tuning) {
  // The trace holds the casts autocast made, those of torch.autocast blocks inside the graph
  // included: the ATen calls here must not be autocast a second time by the caller's autocast
  // (a block with enabled=False would compute in its caller's low precision).
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
  const size_t nb = program_.buffers.size();
  std::vector<at::Tensor> slots(nb);
  if (!program_.input_mutations.empty() && mutated_input_aliases(program_.input_mutations, inputs))
    throw InputMismatch("an input written in place shares memory with another input");
  // The buffer table: one pointer per buffer, the run's kernel error flag, then the size symbols
  // of kernels generated for runtime sizes (codegen/cpp/cpp_codegen.h).
  std::vector<void*> ptrs(nb + 2, nullptr);
  int error = 0;
  ptrs[nb] = &error;
  ptrs[nb + 1] = symbols_.empty() ? nullptr : const_cast<int64_t*>(symbols_.data());
  // On CUDA the flag lives in device memory and is read once, after the last step.
  std::optional<c10::DeviceGuard> guard;
  at::Tensor device_error;
  if (!device_.is_cpu()) guard.emplace(device_);
  if (cuda_) {
    if (cuda_->checks()) device_error = at::zeros({1}, at::TensorOptions().dtype(at::kInt).device(device_));
  }
  std::vector<at::Tensor> donated(nb);  // per buffer: released memory it may take over
  for (size_t b = 0; b < nb; ++b) {
    const Buffer& buf = program_.buffers[b];
    if (buf.kind == Buffer::kInput) {
      const at::Tensor& t = inputs.at(buf.index);
      // In a CUDA graph, inputs traced on the CPU (read by extern calls only) stay there.
      if (!matches(buf, t, input_on_cpu_.at(buf.index) ? c10::Device(c10::kCPU) : device_))
        throw InputMismatch("input " + std::to_string(buf.index) + " differs from the traced one");
      slots[b] = t;
    } else if (buf.kind == Buffer::kConstant) slots[b] = trace_.constants.at(buf.index);
    else continue;
    ptrs[b] = slots[b].data_ptr();
  }
  for (size_t si = 0; si < program_.steps.size(); ++si) {
    const Step& s = program_.steps[si];
    if (s.kind == Step::kKernel) {
      for (int b : kernel_outputs_[s.kernel]) {
        if (slots[b].defined()) continue;
        const Buffer& buf = program_.buffers[b];
        // Reuse only memory nothing else still refers to (an extern view may alias it).
        if (!tuning && donated[b].defined() && donated[b].storage().use_count() == 1)
          slots[b] = donated[b].as_strided(buf.sizes, buf.strides, 0);
        else
          slots[b] = at::empty_strided(buf.sizes, buf.strides, at::TensorOptions().dtype(static_cast<c10::ScalarType>(buf.dtype)).device(device_));
        donated[b] = at::Tensor();
        ptrs[b] = slots[b].data_ptr();
      }
      // Free unless a profiler is on (one atomic load).
      RECORD_FUNCTION(kernel_names_[s.kernel], c10::ArrayRef<const c10::IValue>{});
      if (cuda_) {
#ifdef KILN_WITH_CUDA
        int* err = device_error.defined() ? device_error.data_ptr<int>() : nullptr;
        if (tuning) {
          cuda_->tune(s.kernel, ptrs.data(), err);
        } else if (symbols_.empty()) {
          cuda_->launch(s.kernel, ptrs.data(), err);
        } else {
          const CudaKernels::Sizes sizes{symbols_.data(), sized_launches_.empty() ? nullptr : sized_launches_.data()};
          cuda_->launch(s.kernel, ptrs.data(), err, &sizes);
        }
#endif
      } else {
        kernels_[s.kernel](ptrs.data());
        if (error) throw KernelCheckFailed(error == 1 ? "index out of range" : "integer division by zero");
      }
    } else if (!fast_views_.empty() && fast_views_[si] && slots[fast_views_[si]->in].defined() &&
               slots[fast_views_[si]->in].storage_offset() + fast_views_[si]->offset_delta >= 0) {
      const FastView& f = *fast_views_[si];
      const at::Tensor& in = slots[f.in];
      at::Tensor out = at::detail::make_tensor<c10::TensorImpl>(c10::TensorImpl::VIEW, c10::Storage(in.storage()), in.key_set(), in.dtype());
      out.unsafeGetTensorImpl()->set_storage_offset(in.storage_offset() + f.offset_delta);
      out.unsafeGetTensorImpl()->set_sizes_and_strides(f.sizes, f.strides);
      slots[f.out] = std::move(out);
      ptrs[f.out] = slots[f.out].numel() ? slots[f.out].data_ptr() : nullptr;
    } else {
      const AtenNode& node = trace_.graph.nodes[s.node];
      const auto& schema = ops_[s.node]->schema();
      std::vector<c10::IValue> stack = trace_.node_args[s.node];
      size_t k = 0;
      for (size_t a = 0; a < node.args.size(); ++a) {
        const AtenArg& arg = node.args[a];
        if (arg.kind == AtenArg::kTensor) {
          stack[a] = slots[s.args[k++]];
        } else if (arg.kind == AtenArg::kTensorList) {
          const auto& type = schema.arguments()[a].real_type();
          bool optional_items = type->kind() == c10::TypeKind::ListType && type->containedType(0)->kind() == c10::TypeKind::OptionalType;
          if (optional_items) {
            c10::List<std::optional<at::Tensor>> l;
            for (size_t i = 0; i < arg.values.size(); ++i) {
              int b = s.args[k++];
              l.push_back(b >= 0 ? std::optional<at::Tensor>(slots[b]) : std::nullopt);
            }
            stack[a] = l;
          } else {
            std::vector<at::Tensor> l;
            for (size_t i = 0; i < arg.values.size(); ++i) l.push_back(slots[s.args[k++]]);
            stack[a] = l;
          }
        }
      }
      ops_[s.node]->callBoxed(&stack);
      if (node.list_output) {
        auto l = stack.at(0).toTensorVector();
        for (size_t o = 0; o < s.outputs.size() && o < l.size(); ++o)
          if (s.outputs[o] >= 0) slots[s.outputs[o]] = l[o];
      } else {
        for (size_t o = 0; o < s.outputs.size() && o < stack.size(); ++o)
          if (s.outputs[o] >= 0) slots[s.outputs[o]] = stack[o].toTensor();
      }
      for (int b : s.outputs)
        if (b >= 0) ptrs[b] = slots[b].numel() ? slots[b].data_ptr() : nullptr;
    }
    if (si < program_.frees.size())
      for (int b : program_.frees[si]) {
        if (donee_[b] >= 0 && !tuning) donated[donee_[b]] = std::move(slots[b]);
        slots[b] = at::Tensor();
        ptrs[b] = nullptr;
      }
  }
  if (device_flag) {
    *device_flag = device_error;
  } else if (device_error.defined()) {
    const int e = device_error.item<int>();  // waits for the kernels
    if (e) throw KernelCheckFailed(e == 1 ? "index out of range" : "integer division by zero");
  }
  {
    // An inference program's writes to its inputs are recorded by no autograd (an input that
    // requires grad is written only under no_grad in such a graph: a Parameter made in forward).
    c10::NoGradGuard no_grad;
    for (auto [input, b] : program_.input_mutations) inputs.at(input).copy_(slots[b]);
  }
  std::vector<at::Tensor> outs;
  for (int b : program_.outputs) outs.push_back(slots[b]);
  return outs;
}

}  // namespace kiln::runtime
