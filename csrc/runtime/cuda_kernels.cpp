// Loading and launching a graph's CUDA kernels; see cuda_kernels.h.
#include "runtime/cuda_kernels.h"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cstdint>
#include <stdexcept>
#include <utility>

#include "runtime/cuda_api.h"

namespace kiln::runtime {

namespace {

std::string cu_error(const CudaApi& nv, int r) {
  const char* s = nullptr;
  nv.cuGetErrorString(r, &s);
  return s ? s : "CUDA error " + std::to_string(r);
}

}  // namespace

int cuda_arch(int device) {
  const CudaApi* nv = cuda_api(nullptr);
  if (!nv || !nv->cuDeviceGetAttribute) return 0;
  int major = 0, minor = 0;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR
  if (nv->cuDeviceGetAttribute(&major, 75, device) != 0 || nv->cuDeviceGetAttribute(&minor, 76, device) != 0) return 0;
  return major * 10 + minor;
}

std::shared_ptr<CudaKernels> CudaKernels::load(const std::string& cubin, std::vector<codegen::CudaKernel> kernels, int device,
                                               std::string* error) {
  const CudaApi* api = cuda_api(error);
  if (!api) return nullptr;
  const CudaApi& nv = *api;
  // Selecting the device makes its primary context current on this thread (CUDA 12 and later).
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  void* ctx = nullptr;
  if (nv.cuCtxGetCurrent(&ctx) != 0 || !ctx) {
    *error = "no CUDA context is current for device " + std::to_string(device);
    return nullptr;
  }
  auto k = std::make_shared<CudaKernels>();
  void* module = nullptr;
  if (int r = nv.cuModuleLoadData(&module, cubin.data()); r != 0) {
    *error = "cuModuleLoadData: " + cu_error(nv, r);
    return nullptr;
  }
  k->module_ = module;
  k->device_ = device;
  auto find = [&](const std::string& name, void** out) {
    void* f = nullptr;
    if (int r = nv.cuModuleGetFunction(&f, module, name.c_str()); r != 0) {
      *error = "kernel " + name + " not in the module: " + cu_error(nv, r);
      return false;
    }
    *out = f;
    return true;
  };
  for (const auto& kernel : kernels) {
    void* f = nullptr;
    void* s = nullptr;
    if (!find(kernel.name, &f) || (!kernel.scalar_name.empty() && !find(kernel.scalar_name, &s))) return nullptr;
    k->functions_.push_back(f);
    k->scalar_functions_.push_back(s);
    k->checks_ = k->checks_ || kernel.checks;
  }
  k->kernels_ = std::move(kernels);
  return k;
}

void CudaKernels::launch(int k, void* const* ptrs, int* err) const {
  const codegen::CudaKernel& kernel = kernels_[k];
  bool aligned = true;
  for (int b : kernel.aligned) aligned = aligned && reinterpret_cast<uintptr_t>(ptrs[b]) % 16 == 0;
  const bool vector = kernel.vector_width == 1 || aligned;
  void* f = vector ? functions_[k] : scalar_functions_[k];
  const codegen::CudaLaunch& l = vector ? kernel.launch : kernel.scalar_launch;
  // Each argument is the address of a pointer value.
  std::vector<void*> values(kernel.params.size() + 1);
  std::vector<void*> args(values.size());
  for (size_t i = 0; i < kernel.params.size(); ++i) values[i] = ptrs[kernel.params[i]];
  values.back() = err;
  for (size_t i = 0; i < values.size(); ++i) args[i] = &values[i];
  void* stream = c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device_)).stream();
  const CudaApi& nv = *cuda_api(nullptr);  // loaded: the kernels were
  int r = nv.cuLaunchKernel(f, l.grid, 1, 1, l.block, 1, 1, 0, stream, args.data(), nullptr);
  if (r != 0) throw std::runtime_error("launching " + kernel.name + ": " + cu_error(nv, r));
}

}  // namespace kiln::runtime
