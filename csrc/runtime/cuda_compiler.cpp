// NVRTC compilation and the cubin cache; see cuda_compiler.h.
#include "runtime/cuda_compiler.h"

#include <chrono>
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

}  // namespace kiln::runtime
