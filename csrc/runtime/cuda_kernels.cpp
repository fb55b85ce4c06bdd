// Loading and launching a graph's CUDA kernels; see cuda_kernels.h.
#include "runtime/cuda_kernels.h"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
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

std::shared_ptr<CudaKernels> CudaKernels::load(const std::vector<std::string>& cubins, const std::vector<int>& unit_of,
                                               std::vector<codegen::CudaKernel> kernels, int device, std::string* error,
                                               const std::vector<int>& same) {
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
  k->device_ = device;
  for (const std::string& cubin : cubins) {
    void* module = nullptr;
    if (int r = nv.cuModuleLoadData(&module, cubin.data()); r != 0) {
      *error = "cuModuleLoadData: " + cu_error(nv, r);
      return nullptr;
    }
    k->modules_.push_back(module);
  }
  auto find = [&](void* module, const std::string& name, void** out) {
    void* f = nullptr;
    if (int r = nv.cuModuleGetFunction(&f, module, name.c_str()); r != 0) {
      *error = "kernel " + name + " not in the module: " + cu_error(nv, r);
      return false;
    }
    *out = f;
    return true;
  };
  std::vector<void*> module_spin(k->modules_.size(), nullptr);
  for (size_t m = 0; m < k->modules_.size(); ++m)
    if (nv.cuModuleGetFunction(&module_spin[m], k->modules_[m], "kiln_spin") != 0) module_spin[m] = nullptr;
  // The function names of each kernel's configurations (default first), before the kernels move.
  std::vector<std::vector<std::pair<std::string, std::string>>> names(kernels.size());
  for (size_t i = 0; i < kernels.size(); ++i) {
    names[i].emplace_back(kernels[i].name, kernels[i].scalar_name);
    for (const auto& a : kernels[i].alternatives) names[i].emplace_back(a.name, a.scalar_name);
  }
  for (size_t i = 0; i < kernels.size(); ++i) {
    const size_t from = i < same.size() && same[i] >= 0 && static_cast<size_t>(same[i]) < i ? static_cast<size_t>(same[i]) : i;
    void* module = k->modules_.at(static_cast<size_t>(unit_of.at(i)));
    k->spin_.push_back(module_spin.at(static_cast<size_t>(unit_of.at(i))));
    std::vector<codegen::CudaKernel> all;
    std::vector<codegen::CudaKernel> alternatives = std::move(kernels[i].alternatives);
    kernels[i].alternatives.clear();
    all.push_back(std::move(kernels[i]));
    for (auto& a : alternatives) all.push_back(std::move(a));
    if (names[from].size() != all.size()) {
      *error = "kernel " + all[0].name + " is not the same code as kernel " + names[from][0].first;
      return nullptr;
    }
    std::vector<Variant> vs;
    for (size_t c = 0; c < all.size(); ++c) {
      codegen::CudaKernel& kernel = all[c];
      Variant v;
      const auto& [fn, scalar_fn] = names[from][c];
      if (!find(module, fn, &v.function) || (!kernel.scalar_name.empty() && !find(module, scalar_fn, &v.scalar)))
        return nullptr;
      k->checks_ = k->checks_ || kernel.checks;
      v.config = kernel.config.empty() ? "default" : kernel.config;
      v.kernel = std::move(kernel);
      vs.push_back(std::move(v));
    }
    k->variants_.push_back(std::move(vs));
  }
  k->choice_.assign(k->variants_.size(), 0);
  return k;
}

std::vector<codegen::CudaKernel> CudaKernels::defaults() const {
  std::vector<codegen::CudaKernel> out;
  for (const auto& vs : variants_) out.push_back(vs[0].kernel);
  return out;
}

int CudaKernels::launch_variant(const Variant& v, void* const* ptrs, int* err, void* stream, const int64_t* symbols,
                                const codegen::CudaSizedLaunch* sized) const {
  const codegen::CudaKernel& kernel = v.kernel;
  bool aligned = kernel.vector_width == 1 || !sized || sized->vector;
  for (int b : kernel.aligned) aligned = aligned && reinterpret_cast<uintptr_t>(ptrs[b]) % 16 == 0;
  const bool vector = kernel.vector_width == 1 || aligned;
  void* f = vector ? v.function : v.scalar;
  if (!(sized ? (vector ? sized->launch : sized->scalar_launch) : vector ? kernel.launch : kernel.scalar_launch).grid) return 0;  // no rows
  const codegen::CudaLaunch& l = sized ? (vector ? sized->launch : sized->scalar_launch) : vector ? kernel.launch : kernel.scalar_launch;
  // Each argument is the address of its value: the buffers' pointers, the error flag, then the
  // size symbols in the kernel's index type.
  constexpr size_t kMaxArgs = 64;
  const size_t nargs = kernel.params.size() + 1 + static_cast<size_t>(kernel.symbols);
  void* small_values[kMaxArgs];
  void* small_args[kMaxArgs];
  int small_sym32[kMaxArgs];
  std::vector<void*> big_values, big_args;
  std::vector<int> big_sym32;
  void** values = small_values;
  void** args = small_args;
  int* sym32 = small_sym32;
  if (nargs > kMaxArgs) {
    big_values.resize(nargs), big_args.resize(nargs), big_sym32.resize(nargs);
    values = big_values.data(), args = big_args.data(), sym32 = big_sym32.data();
  }
  for (size_t i = 0; i < kernel.params.size(); ++i) values[i] = ptrs[kernel.params[i]];
  values[kernel.params.size()] = err;
  for (size_t i = 0; i <= kernel.params.size(); ++i) args[i] = &values[i];
  for (int s = 0; s < kernel.symbols; ++s) {
    const size_t a = kernel.params.size() + 1 + static_cast<size_t>(s);
    if (kernel.index32) {
      sym32[s] = static_cast<int>(symbols[s]);
      args[a] = &sym32[s];
    } else {
      args[a] = const_cast<int64_t*>(&symbols[s]);
    }
  }
  const CudaApi& nv = *cuda_api(nullptr);  // loaded: the kernels were
  return nv.cuLaunchKernel(f, l.grid, 1, 1, l.block, 1, 1, 0, stream, args, nullptr);
}

void CudaKernels::launch(int k, void* const* ptrs, int* err, const Sizes* sizes) const {
  const Variant& v = variants_[k][choice_[k]];
  void* stream = c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device_)).stream();
  if (v.kernel.symbols && (!sizes || !sizes->symbols)) throw std::runtime_error("kernel " + v.kernel.name + " needs its size symbols");
  const codegen::CudaSizedLaunch* sized = sizes && sizes->launches ? &sizes->launches[k] : nullptr;
  if (int r = launch_variant(v, ptrs, err, stream, sizes ? sizes->symbols : nullptr, sized); r != 0)
    throw std::runtime_error("launching " + v.kernel.name + ": " + cu_error(*cuda_api(nullptr), r));
}

int CudaKernels::tune(int k, void* const* ptrs, int* err) {
  const std::vector<Variant>& vs = variants_[k];
  const CudaApi& nv = *cuda_api(nullptr);
  void* stream = c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device_)).stream();
  if (vs.size() < 2 || !nv.cuEventCreate || !nv.cuEventRecord || !nv.cuEventSynchronize || !nv.cuEventElapsedTime) {
    launch(k, ptrs, err);
    return choice_[k];
  }
  void *start = nullptr, *end = nullptr;
  if (nv.cuEventCreate(&start, 0) != 0 || nv.cuEventCreate(&end, 0) != 0) {
    launch(k, ptrs, err);
    return choice_[k];
  }
  constexpr int kTuneReps = 20, kTuneRounds = 5;
  constexpr double kTuneMargin = 0.03;
  // The wait: long enough for the host to queue kTuneReps launches (a few microseconds each).
  long long spin_ns = 150000;
  void* spin_args[] = {&spin_ns};
  std::vector<std::vector<float>> rounds(vs.size());
  std::vector<bool> ok(vs.size(), true);
  // A configuration that cannot launch (too many registers for its block size) is skipped.
  for (size_t c = 0; c < vs.size(); ++c) ok[c] = launch_variant(vs[c], ptrs, err, stream) == 0;
  for (int r = 0; r < kTuneRounds; ++r)
    for (size_t c = 0; c < vs.size(); ++c) {
      if (!ok[c]) continue;
      if (spin_[k]) nv.cuLaunchKernel(spin_[k], 1, 1, 1, 1, 1, 1, 0, stream, spin_args, nullptr);
      nv.cuEventRecord(start, stream);
      bool launched = true;
      for (int i = 0; i < kTuneReps && launched; ++i) launched = launch_variant(vs[c], ptrs, err, stream) == 0;
      nv.cuEventRecord(end, stream);
      float ms = 0;
      if (!launched || nv.cuEventSynchronize(end) != 0 || nv.cuEventElapsedTime(&ms, start, end) != 0) {
        ok[c] = false;
        continue;
      }
      rounds[c].push_back(ms);
    }
  if (nv.cuEventDestroy) {
    nv.cuEventDestroy(start);
    nv.cuEventDestroy(end);
  }
  auto median = [](std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return static_cast<double>(v[v.size() / 2]);
  };
  int best = -1;
  double best_ms = 0;
  for (size_t c = 0; c < vs.size(); ++c) {
    if (!ok[c] || rounds[c].empty()) continue;
    const double ms = median(rounds[c]);
    if (best < 0 || ms < best_ms) {
      best = static_cast<int>(c);
      best_ms = ms;
    }
  }
  if (best > 0 && ok[0] && !rounds[0].empty() && best_ms > median(rounds[0]) * (1.0 - kTuneMargin)) best = 0;
  if (best >= 0) choice_[k] = best;
  launch(k, ptrs, err);  // the outputs, from the chosen configuration
  return choice_[k];
}

}  // namespace kiln::runtime
