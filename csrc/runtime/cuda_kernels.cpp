// Loading and launching a graph's CUDA kernels; see cuda_kernels.h.
#include "runtime/cuda_kernels.h"

#include <ATen/Context.h>
#include <ATen/cuda/nvrtc_stub/ATenNVRTC.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cstdint>
#include <stdexcept>
#include <type_traits>
#include <utility>

namespace kiln::runtime {

namespace {

const at::cuda::NVRTC& nvrtc() { return at::globalContext().getNVRTC(); }

std::string cu_error(CUresult r) {
  const char* s = nullptr;
  nvrtc().cuGetErrorString(r, &s);
  return s ? s : "CUDA error " + std::to_string(static_cast<int>(r));
}

// The stub's driver entry points differ between PyTorch versions: the device attribute query
// is used where the stub has it.
template <class N>
auto device_attribute(const N& nv, CUdevice_attribute a, int device, int) -> decltype(nv.cuDeviceGetAttribute, int()) {
  int v = 0;
  return nv.cuDeviceGetAttribute(&v, a, static_cast<CUdevice>(device)) == CUDA_SUCCESS ? v : 0;
}
template <class N>
int device_attribute(const N&, CUdevice_attribute, int, long) { return 0; }

}  // namespace

int cuda_arch(int device) {
  const auto& nv = nvrtc();
  const int major = device_attribute(nv, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device, 0);
  const int minor = device_attribute(nv, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device, 0);
  return major ? major * 10 + minor : 0;
}

std::shared_ptr<CudaKernels> CudaKernels::load(const std::string& cubin, std::vector<codegen::CudaKernel> kernels, int device,
                                               std::string* error) {
  const auto& nv = nvrtc();
  // Selecting the device makes its primary context current on this thread (CUDA 12 and later).
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  CUcontext ctx = nullptr;
  if (nv.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx) {
    *error = "no CUDA context is current for device " + std::to_string(device);
    return nullptr;
  }
  auto k = std::make_shared<CudaKernels>();
  CUmodule module = nullptr;
  if (CUresult r = nv.cuModuleLoadData(&module, cubin.data()); r != CUDA_SUCCESS) {
    *error = "cuModuleLoadData: " + cu_error(r);
    return nullptr;
  }
  k->module_ = module;
  k->device_ = device;
  auto find = [&](const std::string& name, void** out) {
    CUfunction f = nullptr;
    if (CUresult r = nv.cuModuleGetFunction(&f, module, name.c_str()); r != CUDA_SUCCESS) {
      *error = "kernel " + name + " not in the module: " + cu_error(r);
      return false;
    }
    *out = reinterpret_cast<void*>(f);
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
  CUstream stream = c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device_)).stream();
  CUresult r = nvrtc().cuLaunchKernel(reinterpret_cast<CUfunction>(f), l.grid, 1, 1, l.block, 1, 1, 0, stream, args.data(), nullptr);
  if (r != CUDA_SUCCESS) throw std::runtime_error("launching " + kernel.name + ": " + cu_error(r));
}

}  // namespace kiln::runtime
