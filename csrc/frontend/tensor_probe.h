// What the frontend needs to know about tensors, without PyTorch headers.
//
// Implemented in csrc/python/tensor_probe.cpp, the one translation unit that includes ATen.
// Guards use these to check tensors with no Python calls; the interpreter uses them to make
// meta ("fake") tensors that carry shape, stride, dtype and requires_grad but no data.
#pragma once
#include <Python.h>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::frontend {

struct TensorFacts {
  PyTypeObject* type = nullptr;
  uint64_t dispatch_keys = 0;
  int dtype = -1;
  int device_type = -1;
  int device_index = -1;
  bool requires_grad = false;
  std::vector<int64_t> sizes, strides;
};

struct GlobalStateFacts {
  bool grad_enabled = true;
  bool inference_mode = false;
  int default_dtype = -1;
  bool autocast_cpu = false, autocast_cuda = false;
  bool deterministic = false;
  bool operator==(const GlobalStateFacts& o) const {
    return grad_enabled == o.grad_enabled && inference_mode == o.inference_mode &&
           default_dtype == o.default_dtype && autocast_cpu == o.autocast_cpu &&
           autocast_cuda == o.autocast_cuda && deterministic == o.deterministic;
  }
};

bool probe_is_tensor(PyObject* o);
// Fills facts; false if `o` is not a tensor.
bool probe_read(PyObject* o, TensorFacts* facts);
// The hot-path check: allocation-free.
bool probe_matches(PyObject* o, const TensorFacts& facts);
// Why `o` does not match (e.g. "size mismatch at index 0: expected 3, actual 4"), or "".
std::string probe_mismatch(PyObject* o, const TensorFacts& facts);
// "f32[4, 8]" style summary, with the device if not CPU.
std::string probe_describe(const TensorFacts& facts);
std::string probe_describe_tensor(PyObject* t);
// New reference: a meta tensor with t's sizes, strides, dtype and requires_grad.
PyObject* probe_make_meta(PyObject* t);
// New reference: t's torch.device.
PyObject* probe_device(PyObject* t);
// Appends a tensor's metadata, exactly, to a memo key (for memoising shape propagation).
void probe_meta_key(PyObject* t, std::string& key);
// The tensor's version counter (bumped by every in-place write).
uint64_t probe_version(PyObject* t);
GlobalStateFacts probe_global_state();
std::string probe_describe_global_state(const GlobalStateFacts& g);
bool probe_grad_enabled();
void probe_set_grad_enabled(bool on);

}  // namespace kiln::frontend
