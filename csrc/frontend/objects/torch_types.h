// Python-level torch objects the frontend recognises (types and a few functions), looked up
// once when kiln._C is initialised.
#pragma once
#include <Python.h>

namespace kiln::frontend {

struct TorchObjects {
  PyObject* torch = nullptr;          // the torch module
  PyObject* tensor_type = nullptr;    // torch.Tensor
  PyObject* parameter_type = nullptr; // torch.nn.Parameter
  PyObject* module_type = nullptr;    // torch.nn.Module
  PyObject* module_list_type = nullptr;  // torch.nn.ModuleList
  PyObject* dtype_type = nullptr, *device_type = nullptr, *layout_type = nullptr;
  PyObject* memory_format_type = nullptr, *size_type = nullptr;
  PyObject* no_grad = nullptr, *enable_grad = nullptr, *set_grad_enabled = nullptr;
  PyObject* set_grad_enabled_fn = nullptr;  // torch._C._set_grad_enabled
  PyObject* meta_device = nullptr;          // torch.device("meta")
  PyObject* get_default_device = nullptr;   // torch.get_default_device
  PyObject* from_numpy = nullptr;           // torch.from_numpy
  PyObject* global_hook_dicts = nullptr;    // tuple of nn.Module's global hook dicts
  PyObject* operator_mod = nullptr, *builtins_mod = nullptr;
};

// Initialised by init_torch_objects(); raises (returns false) if torch cannot be imported.
extern TorchObjects g_torch;
bool init_torch_objects();

}  // namespace kiln::frontend
