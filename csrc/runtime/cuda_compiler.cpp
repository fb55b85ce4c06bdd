// NVRTC compilation and the cubin cache; see cuda_compiler.h.
#include "runtime/cuda_compiler.h"

#include <ATen/Context.h>
#include <ATen/cuda/nvrtc_stub/ATenNVRTC.h>

#include <chrono>
#include <vector>

#include "runtime/cpp_compiler.h"

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
  const at::cuda::NVRTC& nv = at::globalContext().getNVRTC();
  int major = 0, minor = 0;
  if (nv.nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return finish("NVRTC is not available");
  const std::string arch_flag = "--gpu-architecture=sm_" + std::to_string(arch);
  const std::vector<const char*> flags = {arch_flag.c_str(), "-std=c++17"};
  std::string key_text = source + "\n// " + arch_flag + " -std=c++17 nvrtc " + std::to_string(major) + "." + std::to_string(minor);
  const std::string path = cache_dir(dir) + "/" + hex(fnv1a(key_text)) + ".cubin";
  if (read_verified(path, &r.cubin)) {
    r.cache_hit = true;
    return finish("");
  }
  nvrtcProgram prog;
  if (nv.nvrtcCreateProgram(&prog, source.c_str(), "kiln_kernels.cu", 0, nullptr, nullptr) != NVRTC_SUCCESS)
    return finish("nvrtcCreateProgram failed");
  const nvrtcResult status = nv.nvrtcCompileProgram(prog, static_cast<int>(flags.size()), flags.data());
  if (status != NVRTC_SUCCESS) {
    size_t n = 0;
    std::string log;
    if (nv.nvrtcGetProgramLogSize(prog, &n) == NVRTC_SUCCESS && n > 1) {
      log.resize(n);
      nv.nvrtcGetProgramLog(prog, log.data());
      log.resize(n - 1);
    }
    nv.nvrtcDestroyProgram(&prog);
    if (log.size() > 4000) log = log.substr(0, 4000) + "...";
    return finish(std::string("NVRTC failed (") + nv.nvrtcGetErrorString(status) + ", " + arch_flag + "): " + log);
  }
  size_t size = 0;
  if (nv.nvrtcGetCUBINSize(prog, &size) != NVRTC_SUCCESS || size == 0) {
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
