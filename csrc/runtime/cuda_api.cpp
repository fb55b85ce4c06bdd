// Resolving the NVRTC and driver entry points; see cuda_api.h.
#include "runtime/cuda_api.h"

#include <ATen/Context.h>
#include <dirent.h>
#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <vector>

#if __has_include(<ATen/cuda/nvrtc_stub/ATenNVRTC.h>)
#include <ATen/cuda/nvrtc_stub/ATenNVRTC.h>
#define KILN_ATEN_NVRTC 1
#endif

namespace kiln::runtime {

namespace {

#ifdef KILN_ATEN_NVRTC
// Through ATen's stub: each entry forwards to the stub's function with the CUDA types.
const at::cuda::NVRTC& nv() { return at::globalContext().getNVRTC(); }
int a_nvrtcVersion(int* a, int* b) { return nv().nvrtcVersion(a, b); }
int a_nvrtcCreateProgram(void** p, const char* s, const char* n, int h, const char* const* hs, const char* const* in) {
  return nv().nvrtcCreateProgram(reinterpret_cast<nvrtcProgram*>(p), s, n, h, hs, in);
}
int a_nvrtcCompileProgram(void* p, int n, const char* const* o) { return nv().nvrtcCompileProgram(static_cast<nvrtcProgram>(p), n, o); }
int a_nvrtcGetProgramLogSize(void* p, size_t* n) { return nv().nvrtcGetProgramLogSize(static_cast<nvrtcProgram>(p), n); }
int a_nvrtcGetProgramLog(void* p, char* l) { return nv().nvrtcGetProgramLog(static_cast<nvrtcProgram>(p), l); }
int a_nvrtcGetCUBINSize(void* p, size_t* n) { return nv().nvrtcGetCUBINSize(static_cast<nvrtcProgram>(p), n); }
int a_nvrtcGetCUBIN(void* p, char* c) { return nv().nvrtcGetCUBIN(static_cast<nvrtcProgram>(p), c); }
int a_nvrtcDestroyProgram(void** p) { return nv().nvrtcDestroyProgram(reinterpret_cast<nvrtcProgram*>(p)); }
const char* a_nvrtcGetErrorString(int r) { return nv().nvrtcGetErrorString(static_cast<nvrtcResult>(r)); }
int a_cuModuleLoadData(void** m, const void* image) { return nv().cuModuleLoadData(reinterpret_cast<CUmodule*>(m), image); }
int a_cuModuleGetFunction(void** f, void* m, const char* name) {
  return nv().cuModuleGetFunction(reinterpret_cast<CUfunction*>(f), static_cast<CUmodule>(m), name);
}
int a_cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned smem, void* s,
                     void** params, void** extra) {
  return nv().cuLaunchKernel(static_cast<CUfunction>(f), gx, gy, gz, bx, by, bz, smem, static_cast<CUstream>(s), params, extra);
}
int a_cuCtxGetCurrent(void** c) { return nv().cuCtxGetCurrent(reinterpret_cast<CUcontext*>(c)); }
int a_cuGetErrorString(int r, const char** t) { return nv().cuGetErrorString(static_cast<CUresult>(r), t); }

bool load_from_aten(CudaApi& a, std::string*) {
  a = CudaApi{a_nvrtcVersion, a_nvrtcCreateProgram, a_nvrtcCompileProgram, a_nvrtcGetProgramLogSize, a_nvrtcGetProgramLog,
              a_nvrtcGetCUBINSize, a_nvrtcGetCUBIN, a_nvrtcDestroyProgram, a_nvrtcGetErrorString, a_cuModuleLoadData,
              a_cuModuleGetFunction, a_cuLaunchKernel, a_cuCtxGetCurrent, a_cuGetErrorString, nullptr, nullptr, nullptr, nullptr, nullptr,
              nullptr, "ATen's NVRTC stub"};
  return true;
}
#endif

// The directory of PyTorch's shared libraries (where the process loaded libtorch_cpu from).
std::string torch_lib_dir() {
  Dl_info info;
  if (!dladdr(reinterpret_cast<void*>(&at::globalContext), &info) || !info.dli_fname) return "";
  std::string path = info.dli_fname;
  auto slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

// libnvrtc: already loaded, next to PyTorch (NVIDIA's wheels: site-packages/nvidia/*/lib), in a
// CUDA toolkit, or wherever the loader finds it.
void* open_nvrtc(std::string* tried) {
  static const char* names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so"};
  for (const char* n : names)
    if (void* h = dlopen(n, RTLD_NOW | RTLD_NOLOAD)) return h;
  std::vector<std::string> dirs;
  const std::string lib = torch_lib_dir();
  if (!lib.empty()) {
    dirs.push_back(lib);
    const std::string nvidia = lib + "/../../nvidia";
    if (DIR* d = opendir(nvidia.c_str())) {
      while (dirent* e = readdir(d))
        if (e->d_name[0] != '.') dirs.push_back(nvidia + "/" + e->d_name + "/lib");
      closedir(d);
    }
  }
  for (const char* env : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* v = std::getenv(env); v && *v) dirs.push_back(std::string(v) + "/lib64");
  dirs.push_back("/usr/local/cuda/lib64");
  for (const std::string& d : dirs)
    for (const char* n : names) {
      const std::string p = d + "/" + n;
      if (void* h = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
    }
  for (const char* n : names)
    if (void* h = dlopen(n, RTLD_NOW | RTLD_LOCAL)) return h;
  *tried = "libnvrtc not found (looked next to PyTorch in " + lib + ", its nvidia/*/lib, CUDA_HOME and /usr/local/cuda)";
  return nullptr;
}

template <class F>
bool sym(void* lib, const char* name, F& out, std::string* why) {
  out = reinterpret_cast<F>(dlsym(lib, name));
  if (!out && why->empty()) *why = std::string("missing symbol ") + name;
  return out != nullptr;
}

bool load_with_dlopen(CudaApi& a, std::string* why) {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!driver) {
    *why = "libcuda.so.1 (the CUDA driver) not found";
    return false;
  }
  void* nvrtc = open_nvrtc(why);
  if (!nvrtc) return false;
  bool ok = sym(nvrtc, "nvrtcVersion", a.nvrtcVersion, why) && sym(nvrtc, "nvrtcCreateProgram", a.nvrtcCreateProgram, why) &&
            sym(nvrtc, "nvrtcCompileProgram", a.nvrtcCompileProgram, why) &&
            sym(nvrtc, "nvrtcGetProgramLogSize", a.nvrtcGetProgramLogSize, why) &&
            sym(nvrtc, "nvrtcGetProgramLog", a.nvrtcGetProgramLog, why) && sym(nvrtc, "nvrtcGetCUBINSize", a.nvrtcGetCUBINSize, why) &&
            sym(nvrtc, "nvrtcGetCUBIN", a.nvrtcGetCUBIN, why) && sym(nvrtc, "nvrtcDestroyProgram", a.nvrtcDestroyProgram, why) &&
            sym(nvrtc, "nvrtcGetErrorString", a.nvrtcGetErrorString, why) &&
            sym(driver, "cuModuleLoadData", a.cuModuleLoadData, why) && sym(driver, "cuModuleGetFunction", a.cuModuleGetFunction, why) &&
            sym(driver, "cuLaunchKernel", a.cuLaunchKernel, why) && sym(driver, "cuCtxGetCurrent", a.cuCtxGetCurrent, why) &&
            sym(driver, "cuGetErrorString", a.cuGetErrorString, why);
  std::string ignored;
  sym(driver, "cuDeviceGetAttribute", a.cuDeviceGetAttribute, &ignored);
  Dl_info info;
  a.source = "dlopen: libcuda.so.1, ";
  a.source += dladdr(reinterpret_cast<void*>(a.nvrtcVersion), &info) && info.dli_fname ? info.dli_fname : "libnvrtc";
  return ok;
}

// The event entry points (not in ATen's stub): from the driver library, already in the process.
void load_events(CudaApi& a) {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!driver) return;
  std::string ignored;
  sym(driver, "cuEventCreate", a.cuEventCreate, &ignored);
  sym(driver, "cuEventRecord", a.cuEventRecord, &ignored);
  sym(driver, "cuEventSynchronize", a.cuEventSynchronize, &ignored);
  sym(driver, "cuEventElapsedTime", a.cuEventElapsedTime, &ignored);
  sym(driver, "cuEventDestroy_v2", a.cuEventDestroy, &ignored);
}

}  // namespace

const CudaApi* cuda_api(std::string* why) {
  static std::once_flag once;
  static CudaApi api;
  static bool ok = false;
  static std::string error;
  std::call_once(once, [] {
#ifdef KILN_ATEN_NVRTC
    ok = load_from_aten(api, &error);
#else
    ok = load_with_dlopen(api, &error);
#endif
    if (ok) load_events(api);
  });
  if (!ok && why) *why = error;
  return ok ? &api : nullptr;
}

}  // namespace kiln::runtime
