// The NVRTC and CUDA driver entry points kiln calls, resolved at run time: kiln links neither
// libnvrtc nor libcuda, so a CPU-only machine never needs them (DESIGN §2).
//
// Where PyTorch ships the header of ATen's lazily loaded NVRTC/driver stub
// (ATen/cuda/nvrtc_stub/ATenNVRTC.h), the entry points go through it
// (at::globalContext().getNVRTC()). PyTorch's CUDA wheels do not ship that header (2.11+cu130
// has none), so otherwise they are loaded with dlopen: the driver as libcuda.so.1 (already in
// the process once PyTorch uses CUDA), NVRTC from NVIDIA's wheel beside PyTorch or the system.
// Handles are plain pointers and results ints (0: success), so no CUDA header is needed here.
#pragma once
#include <cstddef>
#include <string>

namespace kiln::runtime {

struct CudaApi {
  // NVRTC
  int (*nvrtcVersion)(int* major, int* minor);
  int (*nvrtcCreateProgram)(void** prog, const char* src, const char* name, int num_headers, const char* const* headers,
                            const char* const* include_names);
  int (*nvrtcCompileProgram)(void* prog, int num_options, const char* const* options);
  int (*nvrtcGetProgramLogSize)(void* prog, size_t* size);
  int (*nvrtcGetProgramLog)(void* prog, char* log);
  int (*nvrtcGetCUBINSize)(void* prog, size_t* size);
  int (*nvrtcGetCUBIN)(void* prog, char* cubin);
  int (*nvrtcDestroyProgram)(void** prog);
  const char* (*nvrtcGetErrorString)(int result);
  // driver
  int (*cuModuleLoadData)(void** module, const void* image);
  int (*cuModuleGetFunction)(void** function, void* module, const char* name);
  int (*cuLaunchKernel)(void* function, unsigned grid_x, unsigned grid_y, unsigned grid_z, unsigned block_x, unsigned block_y,
                        unsigned block_z, unsigned shared_bytes, void* stream, void** params, void** extra);
  int (*cuCtxGetCurrent)(void** context);
  int (*cuGetErrorString)(int result, const char** text);
  int (*cuDeviceGetAttribute)(int* value, int attribute, int device);  // null where unavailable
  // Events, for autotuning (from libcuda.so.1 in either case; null where unavailable).
  int (*cuEventCreate)(void** event, unsigned flags);
  int (*cuEventRecord)(void* event, void* stream);
  int (*cuEventSynchronize)(void* event);
  int (*cuEventElapsedTime)(float* ms, void* start, void* end);
  int (*cuEventDestroy)(void* event);
  std::string source;  // where the entry points came from (for logs)
};

// The entry points, loaded on first use; null with `why` set when NVRTC or the driver is missing.
const CudaApi* cuda_api(std::string* why);

}  // namespace kiln::runtime
