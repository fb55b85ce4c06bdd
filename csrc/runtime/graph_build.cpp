// The build pipeline of one graph; see graph_build.h.
#include "runtime/graph_build.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <set>
#include <stdexcept>
#include <thread>

#include "codegen/cpp/cpp_codegen.h"
#include "codegen/cuda/cuda_codegen.h"
#include "codegen/cuda/kernel_dedup.h"
#include "codegen/cuda/matmul_epilogue.h"
#include "lowering/lowerer.h"
#include "runtime/cpp_compiler.h"
#include "schedule/memory_plan.h"
#include "torch_bridge/attention_fusion.h"
#include "torch_bridge/causal_masks.h"
#ifdef KILN_WITH_CUDA
#include "runtime/cuda_compiler.h"
#endif

namespace kiln::runtime {

// Process-wide CUDA build settings, pushed from kiln's options registry (set_cuda_compile_settings).
constexpr size_t kDefaultCudaUnitBytes = 16000;  // kiln/_options.py's cuda_unit_bytes default
static std::atomic<size_t> g_cuda_unit_bytes{kDefaultCudaUnitBytes};
static std::atomic<bool> g_nvrtc_processes{false};

void set_cuda_compile_settings(size_t unit_bytes, bool in_processes) {
  g_cuda_unit_bytes.store(unit_bytes > 0 ? unit_bytes : kDefaultCudaUnitBytes, std::memory_order_relaxed);
  g_nvrtc_processes.store(in_processes, std::memory_order_relaxed);
}

namespace {
double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The CUDA device a traced graph runs on, or -1 for a CPU graph. Throws for a graph that spans
// several CUDA devices (kernels run on one).
int graph_cuda_device(const bridge::TraceResult& trace, const BuildOptions& opts) {
  bool on_gpu = false;
  for (const ir::AtenValue& v : trace.graph.values) on_gpu = on_gpu || !v.meta.cpu;
  if (!on_gpu) return -1;
  std::set<int> devices;
  if (opts.cuda_device >= 0) devices.insert(opts.cuda_device);
  auto note = [&](const at::Tensor& t) {
    if (!t.defined()) return;
    if (!t.is_cpu() && !t.is_cuda()) throw std::runtime_error("a tensor is on " + t.device().str() + " (kiln generates CPU and CUDA code)");
    if (t.is_cuda()) devices.insert(t.device().index());
  };
  for (const at::Tensor& t : trace.outputs) note(t);
  for (const at::Tensor& t : trace.constants) note(t);
  for (const ir::AtenNode& n : trace.graph.nodes)
    for (const ir::AtenArg& a : n.args)
      if (a.kind == ir::AtenArg::kOther && a.s.rfind("cuda:", 0) == 0) devices.insert(std::atoi(a.s.c_str() + 5));
  if (devices.size() > 1) throw std::runtime_error("the graph uses several CUDA devices");
  if (devices.empty()) throw std::runtime_error("the graph's device is not known");
  return *devices.begin();
}

// The scalars of a CUDA graph (`x * 2` traces as a multiplication by a 0-dim CPU tensor) go to the
// device with it: a kernel can read them there, where a CPU tensor would make the operator an
// ATen call of its own. Wrapped numbers stay wrapped, so type promotion is unchanged.
void move_scalar_constants(bridge::TraceResult& trace, int device) {
  std::vector<bool> moved(trace.constants.size(), false);
  for (size_t i = 0; i < trace.constants.size(); ++i) {
    at::Tensor& t = trace.constants[i];
    if (!t.defined() || !t.is_cpu() || t.dim() != 0) continue;
    const bool wrapped = t.unsafeGetTensorImpl()->is_wrapped_number();
    t = t.to(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device)));
    if (wrapped) t.unsafeGetTensorImpl()->set_wrapped_number(true);
    moved[i] = true;
  }
  for (ir::AtenValue& v : trace.graph.values)
    if (v.kind == ir::AtenValue::kConstant && v.index >= 0 && moved.at(static_cast<size_t>(v.index))) v.meta.cpu = false;
}

#ifdef KILN_WITH_CUDA
// Generates CUDA for the program, compiles it with NVRTC (or loads the cubin from the cache) and
// loads it on the device.
// With `sizes`, the kernels are generated for runtime sizes (codegen::generate_cuda).
std::shared_ptr<CompiledGraph> build_cuda(bridge::TraceResult trace, ir::Program prog, int device, const BuildOptions& opts,
                                          BuildResult& r, const codegen::CudaSizes* sizes = nullptr) {
  auto t1 = std::chrono::steady_clock::now();
  codegen::CudaModule m = codegen::generate_cuda(prog, opts.autotune && !sizes, sizes);
  r.source = "// ---- CUDA source (after kiln's CUDA prefix header); launches:\n";
  for (const auto& k : m.kernels) r.source += "//   " + codegen::launch_string(k) + "\n";
  r.source += m.source.substr(codegen::cuda_prefix_header().size());
  r.timings.push_back({"codegen", since(t1)});
  const int arch = opts.cuda_arch ? opts.cuda_arch : cuda_arch(device);
  if (!arch) throw std::runtime_error("the compute capability of CUDA device " + std::to_string(device) + " is not known");
  // Programs of many kernels are split into units of about kCudaUnitBytes of kernel source, at
  // most one per compile job, compiled by NVRTC on as many threads (option nvrtc_processes: child
  // processes); one unit is the whole source as it always was (the same cubin cache entry). NVRTC
  // takes ~0.2 s per kernel on the H200's host and its threads overlap (hf_llama's 45 kernels as
  // one unit: 8.97 s; as 8 units on 8 threads: 2.08 s), so units are small.
  // The unit size is an option (cuda_unit_bytes, KILN_CUDA_UNIT_BYTES: measurements of NVRTC's
  // concurrency), pushed by set_cuda_compile_settings.
  const size_t kCudaUnitBytes = g_cuda_unit_bytes.load(std::memory_order_relaxed);
  // A kernel that is the same code as an earlier one (a model's repeated layers) is not compiled
  // again: it runs the earlier one's function (codegen/cuda/kernel_dedup.h).
  const std::vector<int> same = codegen::same_kernels(m);
  const size_t n = m.kernels.size();
  size_t total = 0, distinct = 0;
  for (size_t k = 0; k < n; ++k)
    if (same[k] == static_cast<int>(k)) {
      total += m.kernel_sources[k].size();
      ++distinct;
    }
  const size_t max_units = std::min<size_t>(static_cast<size_t>(compile_jobs(opts.jobs)), distinct);
  const size_t units = std::max<size_t>(1, std::min(max_units, (total + kCudaUnitBytes - 1) / kCudaUnitBytes));
  const std::string prefix = codegen::cuda_prefix_header() + "\n";
  std::vector<std::string> sources;
  std::vector<int> unit_of(n, 0);
  {
    size_t before = 0;
    int last = -1;
    for (size_t k = 0; k < n; ++k) {
      if (same[k] != static_cast<int>(k)) {
        unit_of[k] = unit_of[static_cast<size_t>(same[k])];
        continue;
      }
      const int u = static_cast<int>(std::min(units - 1, total ? before * units / total : 0));
      if (u != last) {  // contiguous groups of about total / units bytes; none left empty
        sources.push_back(prefix);
        last = u;
      }
      unit_of[k] = static_cast<int>(sources.size()) - 1;
      sources.back() += m.kernel_sources[k];
      before += m.kernel_sources[k].size();
    }
  }
  const std::string dir = cache_dir(opts.cache_dir);
  auto t2 = std::chrono::steady_clock::now();
  // Option nvrtc_processes (KILN_NVRTC_PROCESSES=1): units compile in child processes instead of threads.
  const bool processes = g_nvrtc_processes.load(std::memory_order_relaxed);
  std::vector<CubinResult> results = compile_cuda_units(dir, sources, arch, processes);
  r.cache_hit = true;
  std::vector<std::string> cubins;
  for (CubinResult& cr : results) {
    r.cache_hit = r.cache_hit && cr.cache_hit;
    if (cr.cubin.empty()) throw std::runtime_error(cr.error);
    cubins.push_back(std::move(cr.cubin));
  }
  r.timings.push_back({r.cache_hit ? "load_cached" : "compile", since(t2)});
  r.counts.push_back({"cuda_units", static_cast<int64_t>(sources.size())});
  r.counts.push_back({"cuda_kernels_compiled", static_cast<int64_t>(distinct)});
  auto t3 = std::chrono::steady_clock::now();
  std::string err;
  auto kernels = CudaKernels::load(cubins, unit_of, std::move(m.kernels), device, &err, same);
  if (!kernels) throw std::runtime_error(err);
  if (opts.autotune && !sizes) {
    // The choices of an earlier process, kept beside the cubins, keyed by the source (with its
    // alternatives) and the architecture.
    kernels->tune_path = dir + "/" + hex(fnv1a(m.source + "\n// tune sm_" + std::to_string(arch))) + ".tune";
    kernels->needs_tuning = true;
    std::string text;
    if (read_verified(kernels->tune_path, &text)) {
      std::vector<int> choice(kernels->size(), -1);
      size_t pos = 0;
      while (pos < text.size()) {
        size_t eol = text.find('\n', pos);
        if (eol == std::string::npos) eol = text.size();
        const std::string line = text.substr(pos, eol - pos);
        pos = eol + 1;
        const size_t sp = line.find(' ');
        if (sp == std::string::npos) continue;
        const long k = std::strtol(line.c_str(), nullptr, 10), c = std::strtol(line.c_str() + sp + 1, nullptr, 10);
        if (k >= 0 && static_cast<size_t>(k) < choice.size() && c >= 0 && c < kernels->configurations(static_cast<int>(k)))
          choice[static_cast<size_t>(k)] = static_cast<int>(c);
      }
      bool complete = true;
      for (int c : choice) complete = complete && c >= 0;
      if (complete) {
        for (size_t k = 0; k < choice.size(); ++k) kernels->set_choice(static_cast<int>(k), choice[k]);
        kernels->needs_tuning = false;
      }
    }
  }
  r.timings.push_back({"load", since(t3)});
  auto g = std::make_shared<CompiledGraph>(std::move(trace), std::move(prog));
  g->use_cuda(std::move(kernels), device);
  return g;
}
#endif

// Generates C++ for a CPU program (its size-dependent integers spelled through `sizes`, if set),
// compiles it or loads it from the cache, and loads it.
void build_cpu(bridge::TraceResult trace, ir::Program prog, const codegen::SizeSymbols* sizes, const BuildOptions& opts, BuildResult& r) {
  // The key is the code itself (and how it is compiled): any change to the generator, its
  // prefix header or the program gives a new entry. Kernels for runtime sizes spell the
  // symbolic sizes in their code, so their key says which sizes are symbolic, and not their values.
  auto t1 = std::chrono::steady_clock::now();
  // One translation unit per ~24 kB of source, at most one per job: small graphs pay for one
  // compiler process, large ones use every core.
  auto sources = codegen::generate_cpp(prog, compile_jobs(opts.jobs), 24000, sizes);
  uint64_t h = fnv1a(codegen::compile_flags() + "\n" + compiler_command());
  const std::string prefix = codegen::prefix_header();
  for (size_t u = 0; u < sources.size(); ++u) {
    h = fnv1a("\n// unit\n" + sources[u], h);
    r.source += "// ---- translation unit " + std::to_string(u) + " (after kiln's prefix header) ----\n" + sources[u].substr(prefix.size());
  }
  r.timings.push_back({"codegen", since(t1)});
  CompileResult cr = compile_cached(cache_dir(opts.cache_dir), hex(h), sources, opts.jobs);
  r.timings.push_back({cr.cache_hit ? "load_cached" : "compile", cr.seconds});
  r.cache_hit = cr.cache_hit;
  if (cr.library.empty()) throw std::runtime_error(cr.error);
  auto g = std::make_shared<CompiledGraph>(std::move(trace), std::move(prog));
  std::string err;
  if (!g->load(cr.library, &err)) throw std::runtime_error(err);
  r.graph = std::move(g);
}

}  // namespace

ir::Program lower_graph(bridge::TraceResult& trace, const BuildOptions& opts) {
  const int device = graph_cuda_device(trace, opts);
#ifndef KILN_WITH_CUDA
  if (device >= 0) throw std::runtime_error("kiln was built without CUDA support (its PyTorch has no CUDA, or CUDA's headers were not found)");
#endif
  if (!opts.extern_only) {
    bridge::fuse_attention(trace, device, opts.sizes_vary);
    bridge::use_causal_attention(trace);
  }
  if (device >= 0) {
    move_scalar_constants(trace, device);
    if (!opts.extern_only)
      for (const codegen::EpilogueFusion& f : codegen::fuse_matmul_epilogues(trace.graph))
        trace.node_args.at(static_cast<size_t>(f.node)).push_back(c10::IValue(f.use_gelu));
  }
  lowering::LoweringOptions lo;
  lo.fuse = opts.fuse;
  lo.cuda = device >= 0;
  lo.extern_only = opts.extern_only;
  ir::Program prog = lowering::Lowerer(trace.graph, lo).run();
  schedule::plan_memory(prog);
  return prog;
}

// A program with nothing to generate (its ATen calls alone) runs on the graph's device, `device`
// (-1: the CPU). On CUDA it ran on none: its inputs never matched the CPU it was placed on, so
// every call declined and ran op by op (a Linear, tanh GELU, Linear block on CUDA is two matmuls,
// one with cuBLASLt's bias+GELU epilogue, and no kernel of kiln's).
static std::shared_ptr<CompiledGraph> extern_calls_only(bridge::TraceResult trace, ir::Program prog, int device) {
  auto g = std::make_shared<CompiledGraph>(std::move(trace), std::move(prog));
  if (device >= 0) g->use_device(device);
  return g;
}

BuildResult build_for_sizes(bridge::TraceResult trace, ir::Program prog, const ir::SizeTemplate& tmpl, std::vector<int64_t> symbols,
                            const BuildOptions& opts) {
  BuildResult r;
  try {
    const int device = graph_cuda_device(trace, opts);
    const ir::ProgramInts ints = ir::program_ints(prog);
    std::string why;
    if (!ir::matches(tmpl, ints, symbols, &why)) throw std::runtime_error("the program is not the template's: " + why);
    auto spelling = ir::spell_ints(tmpl, ints, &why);
    if (!spelling) throw std::runtime_error(why);
    if (prog.kernels.empty()) {
      r.graph = extern_calls_only(std::move(trace), std::move(prog), device);
    } else if (device >= 0) {
#ifdef KILN_WITH_CUDA
      codegen::CudaSizes sizes{std::move(*spelling), tmpl.num_symbols};
      r.graph = build_cuda(std::move(trace), std::move(prog), device, opts, r, &sizes);
#endif
    } else {
      codegen::SizeSymbols sizes{std::move(*spelling), tmpl.num_symbols};
      build_cpu(std::move(trace), std::move(prog), &sizes, opts, r);
    }
    r.graph->set_size_symbols(std::move(symbols));
  } catch (const std::exception& e) {
    r.graph.reset();
    r.error = e.what();
  }
  return r;
}

std::shared_ptr<CompiledGraph> share_sized_kernels(bridge::TraceResult trace, ir::Program prog, const CompiledGraph& base,
                                                   const ir::SizeTemplate& tmpl, std::vector<int64_t> symbols, std::string* why) {
  auto g = std::make_shared<CompiledGraph>(std::move(trace), std::move(prog));
  if (!base.on_cuda()) {
    g->share_kernels(base, std::move(symbols));
    return g;
  }
  auto spelling = ir::spell_ints(tmpl, ir::program_ints(g->program()), why);  // the program's own fields
  if (!spelling) return nullptr;
  const codegen::CudaSizes sizes{std::move(*spelling), tmpl.num_symbols};
  return g->share_kernels(base, std::move(symbols), &sizes, why) ? g : nullptr;
}

BuildResult build_lowered(bridge::TraceResult trace, ir::Program prog, const BuildOptions& opts) {
  BuildResult r;
  try {
    const int device = graph_cuda_device(trace, opts);
    if (prog.kernels.empty()) r.graph = extern_calls_only(std::move(trace), std::move(prog), device);
#ifdef KILN_WITH_CUDA
    else if (device >= 0) r.graph = build_cuda(std::move(trace), std::move(prog), device, opts, r);
#endif
    else build_cpu(std::move(trace), std::move(prog), nullptr, opts, r);
  } catch (const std::exception& e) {
    r.graph.reset();
    r.error = e.what();
  }
  return r;
}

static std::string template_path(const BuildOptions& opts, const std::string& shape) {
  return cache_dir(opts.cache_dir) + "/" + hex(fnv1a("kiln size template\n" + shape)) + ".sizes";
}

void store_size_template(const BuildOptions& opts, const ir::SizeTemplate& t, const std::string& note) {
  const std::string dir = cache_dir(opts.cache_dir);
  if (note.find('\n') != std::string::npos || !make_dirs(dir)) return;  // a cache that cannot be written costs a build later
  store_verified(template_path(opts, t.shape), note + "\n" + ir::template_text(t));
}

std::optional<std::pair<ir::SizeTemplate, std::string>> load_size_template(const BuildOptions& opts, const std::string& shape) {
  std::string text;
  if (!read_verified(template_path(opts, shape), &text)) return std::nullopt;
  const size_t eol = text.find('\n');
  if (eol == std::string::npos) return std::nullopt;
  auto t = ir::parse_template(text.substr(eol + 1));
  if (!t || t->shape != shape) return std::nullopt;  // a damaged entry, or another program with the same hash
  return std::make_pair(std::move(*t), text.substr(0, eol));
}

BuildResult build_graph(bridge::TraceResult trace, const BuildOptions& opts) {
  BuildResult r;
  try {
    auto t0 = std::chrono::steady_clock::now();
    const int device = graph_cuda_device(trace, opts);
    ir::Program prog = lower_graph(trace, opts);
    r.timings.push_back({"lower", since(t0)});
    if (prog.kernels.empty()) {  // nothing to generate: the program is its ATen calls
      r.graph = extern_calls_only(std::move(trace), std::move(prog), device);
      return r;
    }
#ifdef KILN_WITH_CUDA
    if (device >= 0) {
      r.graph = build_cuda(std::move(trace), std::move(prog), device, opts, r);
      return r;
    }
#endif
    build_cpu(std::move(trace), std::move(prog), nullptr, opts, r);
  } catch (const std::exception& e) {
    r.graph.reset();
    r.error = e.what();
  }
  return r;
}

BackgroundBuild::BackgroundBuild(bridge::TraceResult trace, BuildOptions opts)
    : thread_([this, t = std::move(trace), o = std::move(opts)]() mutable {
        result_ = build_graph(std::move(t), o);
        done_.store(true, std::memory_order_release);
      }) {}

BackgroundBuild::~BackgroundBuild() {
  if (thread_.joinable()) thread_.join();
}

BuildResult BackgroundBuild::take() {
  if (thread_.joinable()) thread_.join();
  return std::move(result_);
}

}  // namespace kiln::runtime
