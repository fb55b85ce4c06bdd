// The build pipeline of one graph; see graph_build.h.
#include "runtime/graph_build.h"

#include <chrono>

#include "codegen/cpp/cpp_codegen.h"
#include "lowering/lowerer.h"
#include "runtime/cpp_compiler.h"
#include "schedule/memory_plan.h"

namespace kiln::runtime {

namespace {
double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

BuildResult build_graph(bridge::TraceResult trace, const BuildOptions& opts) {
  BuildResult r;
  try {
    auto t0 = std::chrono::steady_clock::now();
    lowering::LoweringOptions lo;
    lo.fuse = opts.fuse;
    lo.extern_only = opts.extern_only;
    ir::Program prog = lowering::Lowerer(trace.graph, lo).run();
    schedule::plan_memory(prog);
    r.timings.push_back({"lower", since(t0)});
    if (prog.kernels.empty()) {  // nothing to generate: the program is its ATen calls
      r.graph = std::make_shared<CompiledGraph>(std::move(trace), std::move(prog));
      return r;
    }
    // The key is the code itself (and how it is compiled): any change to the generator, its
    // prefix header or the program gives a new entry.
    auto t1 = std::chrono::steady_clock::now();
    // One translation unit per ~24 kB of source, at most one per job: small graphs pay for one
    // compiler process, large ones use every core.
    auto sources = codegen::generate_cpp(prog, compile_jobs(opts.jobs), 24000);
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
