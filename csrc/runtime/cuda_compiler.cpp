// NVRTC compilation and the cubin cache; see cuda_compiler.h.
#include "runtime/cuda_compiler.h"

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <thread>
#include <vector>

#include "runtime/cpp_compiler.h"
#include "runtime/cuda_api.h"

namespace kiln::runtime {

CubinResult compile_cuda_cached(const std::string& dir, const std::string& source, int arch) {
  auto t0 = std::chrono::steady_clock::now();
  CubinResult r;
  auto finish = [&](std::string error) {
    r.error = std::move(error);
    if (!r.error.empty()) r.cubin.clear();
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
  };
  std::string why;
  const CudaApi* api = cuda_api(&why);
  if (!api) return finish("NVRTC is not available: " + why);
  const CudaApi& nv = *api;
  int major = 0, minor = 0;
  if (nv.nvrtcVersion(&major, &minor) != 0) return finish("nvrtcVersion failed");
  const std::string arch_flag = "--gpu-architecture=sm_" + std::to_string(arch);
  const std::vector<const char*> flags = {arch_flag.c_str(), "-std=c++17"};
  std::string key_text = source + "\n// " + arch_flag + " -std=c++17 nvrtc " + std::to_string(major) + "." + std::to_string(minor);
  const std::string path = cache_dir(dir) + "/" + hex(fnv1a(key_text)) + ".cubin";
  if (read_verified(path, &r.cubin)) {
    r.cache_hit = true;
    return finish("");
  }
  void* prog = nullptr;
  if (nv.nvrtcCreateProgram(&prog, source.c_str(), "kiln_kernels.cu", 0, nullptr, nullptr) != 0) return finish("nvrtcCreateProgram failed");
  const int status = nv.nvrtcCompileProgram(prog, static_cast<int>(flags.size()), flags.data());
  if (status != 0) {
    size_t n = 0;
    std::string log;
    if (nv.nvrtcGetProgramLogSize(prog, &n) == 0 && n > 1) {
      log.resize(n);
      nv.nvrtcGetProgramLog(prog, log.data());
      log.resize(n - 1);
    }
    nv.nvrtcDestroyProgram(&prog);
    if (log.size() > 4000) log = log.substr(0, 4000) + "...";
    return finish(std::string("NVRTC failed (") + nv.nvrtcGetErrorString(status) + ", " + arch_flag + "): " + log);
  }
  size_t size = 0;
  if (nv.nvrtcGetCUBINSize(prog, &size) != 0 || size == 0) {
    nv.nvrtcDestroyProgram(&prog);
    return finish("NVRTC produced no cubin for " + arch_flag);
  }
  r.cubin.resize(size);
  nv.nvrtcGetCUBIN(prog, r.cubin.data());
  nv.nvrtcDestroyProgram(&prog);
  // A cache that cannot be written costs a recompile next time, nothing else.
  if (make_dirs(cache_dir(dir))) store_verified(path, r.cubin);
  return finish("");
}

std::vector<CubinResult> compile_cuda_units(const std::string& dir, const std::vector<std::string>& sources, int arch, bool processes) {
  std::vector<CubinResult> results(sources.size());
  if (sources.size() == 1) {
    results[0] = compile_cuda_cached(dir, sources[0], arch);
    return results;
  }
  if (!processes) {
    std::vector<std::thread> threads;
    for (size_t u = 0; u < sources.size(); ++u)
      threads.emplace_back([&, u] { results[u] = compile_cuda_cached(dir, sources[u], arch); });
    for (auto& t : threads) t.join();
    return results;
  }
  // NVRTC is loaded (and its version read) here, before any child exists: a child only compiles.
  // Children are made before any compile of this call starts, so none inherits a lock that an
  // NVRTC compile on another thread of this process holds.
  auto t0 = std::chrono::steady_clock::now();
  std::string why;
  int major = 0, minor = 0;
  const CudaApi* api = cuda_api(&why);
  if (!api || api->nvrtcVersion(&major, &minor) != 0) {
    for (size_t u = 0; u < sources.size(); ++u) results[u] = compile_cuda_cached(dir, sources[u], arch);  // the error, per unit
    return results;
  }
  // Exit status of a child: 0 compiled and stored, 3 already in the cache, anything else failed.
  std::vector<pid_t> children(sources.size(), -1);
  for (size_t u = 0; u < sources.size(); ++u) {
    const pid_t pid = fork();
    if (pid == 0) {
      const CubinResult r = compile_cuda_cached(dir, sources[u], arch);
      _exit(r.cubin.empty() ? 1 : r.cache_hit ? 3 : 0);
    }
    children[u] = pid;  // -1 where fork failed: compiled below, in this process
  }
  std::vector<bool> was_cached(sources.size(), false);
  for (size_t u = 0; u < sources.size(); ++u) {
    if (children[u] <= 0) continue;
    int status = 0;
    pid_t got;
    do {
      got = waitpid(children[u], &status, 0);
    } while (got < 0 && errno == EINTR);
    was_cached[u] = got == children[u] && WIFEXITED(status) && WEXITSTATUS(status) == 3;
  }
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (size_t u = 0; u < sources.size(); ++u) {
    results[u] = compile_cuda_cached(dir, sources[u], arch);  // a cache hit, unless the child failed
    results[u].cache_hit = results[u].cache_hit && (children[u] <= 0 || was_cached[u]);
    results[u].seconds += elapsed;
  }
  return results;
}

}  // namespace kiln::runtime
