// What the frontend needs to know about tensors, without PyTorch headers.
//
// Implemented in csrc/python/meta/tensor_probe.cpp, the one translation unit that includes ATen.
// Guards use these to check tensors with no Python calls; the interpreter uses them to make
// meta ("fake") tensors that carry shape, stride, dtype and requires_grad but no data.
#pragma once
#include <Python.h>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "symbolic/shape_env.h"

namespace kiln::frontend {

struct TensorFacts {
  PyTypeObject* type = nullptr;
  uint64_t dispatch_keys = 0;
  int dtype = -1;
  int device_type = -1;
  int device_index = -1;
  bool requires_grad = false;
  std::vector<int64_t> sizes, strides;
  // Dynamic dimensions (empty: every size is checked exactly). Per dimension the symbol its size
  // binds (-1: static), and per dimension the stride expected, as an expression of the symbols.
  std::vector<int> size_symbol;
  std::vector<sym::Expr> stride_expr;
};

// Symbol values of one guard check: each dynamic dimension binds its symbol (or, bound already
// by another tensor under duck sizing, must equal it).
struct SymbolBinding {
  static constexpr int kMax = 64;
  int64_t values[kMax];
  uint64_t bound = 0;
};

struct GlobalStateFacts {
  bool grad_enabled = true;
  bool inference_mode = false;
  int default_dtype = -1;
  bool autocast_cpu = false, autocast_cuda = false;
  int autocast_cpu_dtype = -1, autocast_cuda_dtype = -1;  // what autocast casts to (when on)
  bool deterministic = false;
  bool operator==(const GlobalStateFacts& o) const {
    return grad_enabled == o.grad_enabled && inference_mode == o.inference_mode &&
           default_dtype == o.default_dtype && autocast_cpu == o.autocast_cpu &&
           autocast_cuda == o.autocast_cuda && autocast_cpu_dtype == o.autocast_cpu_dtype &&
           autocast_cuda_dtype == o.autocast_cuda_dtype && deterministic == o.deterministic;
  }
};

bool probe_is_tensor(PyObject* o);
// Fills facts; false if `o` is not a tensor.
bool probe_read(PyObject* o, TensorFacts* facts);
// The hot-path check: allocation-free. Facts with dynamic dimensions need a binding.
bool probe_matches(PyObject* o, const TensorFacts& facts, SymbolBinding* binding = nullptr);
// The same check on sizes and strides alone (elements; a numpy array's guard).
bool probe_layout_matches(const int64_t* sizes, const int64_t* strides, size_t ndim, const TensorFacts& facts, SymbolBinding* binding);
// Why `o` does not match (e.g. "size mismatch at index 0: expected 3, actual 4"), or "".
std::string probe_mismatch(PyObject* o, const TensorFacts& facts);
// "f32[4, 8]" style summary, with the device if not CPU.
std::string probe_describe(const TensorFacts& facts);
std::string probe_describe_tensor(PyObject* t);
// New reference: a meta tensor with t's sizes, strides and dtype, requiring grad as t does (a
// leaf, or not: bridge::requires_grad_like).
PyObject* probe_make_meta(PyObject* t);
// Shape propagation in C++ for common elementwise operators (csrc/python/meta/fast_meta.cpp): the
// meta result of `target(*args, **kwargs)` (or of the tensor method `method` on args[0]) from
// ATen's own meta functions, or nullptr, with no Python error set, where the call is not one it
// handles (the caller then runs the Python call).
PyObject* probe_fast_meta(PyObject* target, const std::string& method, PyObject* args, PyObject* kwargs);
// Likewise with symbolic sizes (csrc/python/meta/symbolic_meta.cpp): the composite operators whose
// PyTorch meta path makes a size a constant (F.cross_entropy, F.nll_loss), then the two below.
PyObject* probe_symbolic_meta(PyObject* target, const std::string& method, PyObject* args, PyObject* kwargs);
// Likewise for view operators (view, reshape, transpose, permute, t, unsqueeze, split, contiguous,
// flatten), computed with SymInts where the result is provable without a guard
// (csrc/python/meta/symbolic_views.cpp).
PyObject* probe_symbolic_view(PyObject* target, const std::string& method, PyObject* args, PyObject* kwargs);
// Likewise, for the operators probe_fast_meta answers: it runs at probe values of the symbols and
// its result's sizes are read back as symbols (csrc/python/meta/symbolic_probe.cpp).
PyObject* probe_symbolic_fast_meta(PyObject* target, const std::string& method, PyObject* args, PyObject* kwargs);
// New reference: t's torch.device.
PyObject* probe_device(PyObject* t);
// New reference: a 0-d float64 CPU tensor holding the Python float `f` (a dynamic float's graph
// input), or null with an exception set.
PyObject* probe_float_tensor(PyObject* f);
// New reference: a 0-d float64 meta tensor.
PyObject* probe_float64_meta();
// Appends a tensor's metadata, exactly, to a memo key (for memoising shape propagation); false
// for a tensor with symbolic sizes (never memoised: the memo would outlive its shape env).
bool probe_meta_key(PyObject* t, std::string& key);

// ---- symbolic sizes (csrc/torch_bridge/sym_node.cpp)
// New reference: a meta tensor like t with the given symbolic sizes and strides.
PyObject* probe_make_symbolic_meta(PyObject* t, const std::shared_ptr<sym::ShapeEnv>& env,
                                   const std::vector<sym::Expr>& sizes, const std::vector<sym::Expr>& strides);
// While set (meta execution), a float that meta code computes from symbolic sizes and then
// reads is taken as a value (a scalar operand), not guarded; floats that become ints or bools
// (a size computed with floor(), a comparison) still guard the sizes they came from.
void probe_set_meta_mode(bool on);
bool probe_meta_mode();
struct MetaModeScope {
  bool prev;
  MetaModeScope() : prev(probe_meta_mode()) { probe_set_meta_mode(true); }
  ~MetaModeScope() { probe_set_meta_mode(prev); }
};
// New reference: a torch.SymInt standing for `e`.
PyObject* probe_make_symint(const std::shared_ptr<sym::ShapeEnv>& env, const sym::Expr& e);
// The expression of a torch.SymInt / SymBool made by kiln; false for anything else.
bool probe_symbolic_value(PyObject* o, sym::Expr* out);
// The value of a torch.SymInt made by kiln under the current hints, guarding nothing; false for
// anything else.
bool probe_symbolic_hint(PyObject* o, int64_t* out);
bool probe_is_symbolic_tensor(PyObject* t);

// Each size as a string ("s0", "64*s1", "8").
std::vector<std::string> probe_symbolic_sizes(PyObject* t);
// The tensor's version counter (bumped by every in-place write).
uint64_t probe_version(PyObject* t);
// The storage a tensor (meta ones included) views, as an address: views of one base share it;
// null for a tensor without storage.
const void* probe_storage(PyObject* t);
GlobalStateFacts probe_global_state();
std::string probe_describe_global_state(const GlobalStateFacts& g);
bool probe_grad_enabled();
void probe_set_grad_enabled(bool on);
// torch.inference_mode across kiln's graph boundaries: a thread-local stack of c10::InferenceMode
// guards (pushed and popped in order, as with-blocks nest).
bool probe_inference_enabled();
void probe_push_inference_mode(bool enabled);
bool probe_pop_inference_mode();  // false when kiln pushed none
bool probe_is_inference(PyObject* tensor);
// The thread's autocast state (per device type, the cache flag, the nesting depth): saved before a
// graph that enters torch.autocast blocks and put back if it raises inside one.
struct AutocastState {
  bool cpu = false, cuda = false, cache = true;
  int cpu_dtype = -1, cuda_dtype = -1;
  int64_t nesting = 0;
};
AutocastState probe_autocast_state();
void probe_restore_autocast_state(const AutocastState& s);
// Whether saved-tensor hooks are installed on this thread (activation checkpointing, offloading).
bool probe_saved_tensor_hooks_active();

}  // namespace kiln::frontend
