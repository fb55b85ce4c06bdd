// Shape propagation with symbolic sizes for composite operators whose PyTorch meta path turns a
// symbolic size into a constant (see probe_symbolic_meta in frontend/objects/tensor_probe.h).
//
// F.cross_entropy and F.nll_loss: PyTorch's reference nll_loss, which the Python dispatcher runs
// for meta tensors with symbolic sizes, indexes the input with torch.arange(batch), and arange's
// meta kernel needs a concrete length. A language model's loss over batch*length rows therefore
// guarded `2*s0 == 32`: training over new lengths recompiled at every length. The result of these
// losses follows from the arguments alone: one loss per row for reduction='none', else a 0-d
// tensor, of the input's dtype. Only the plain form is answered here (a 2-d input of classes, a
// 1-d integer target of the same rows, provably, an optional 1-d weight); anything else, and every
// error, takes the Python path.
//
// probe_symbolic_meta is the capture's entry for every operator with symbolic sizes: these losses,
// then view operators (symbolic_views.cpp), then the operators with static C++ shape functions
// evaluated at probe sizes (symbolic_probe.cpp); what none answers runs PyTorch's Python meta path.
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <torch/csrc/autograd/python_variable.h>

#include <cstring>
#include <vector>

#include "frontend/objects/tensor_probe.h"
#include "python/call_binding.h"
#include "python/capture_autograd.h"
#include "torch_bridge/sym_node.h"

namespace kiln::frontend {

namespace {

bool meta_tensor(PyObject* o, at::Tensor* t) {
  if (!o || !THPVariable_CheckExact(o)) return false;
  const at::Tensor& x = THPVariable_Unpack(o);
  if (!x.defined() || !x.is_meta() || x.layout() != at::kStrided) return false;
  *t = x;
  return true;
}

using bridge::provably_equal;

PyObject* loss_meta(PyObject* args, PyObject* kwargs, bool cross_entropy) {
  static const std::vector<const char*> nll = {"input", "target", "weight", "size_average", "ignore_index", "reduce", "reduction"};
  static const std::vector<const char*> ce = {"input", "target", "weight", "size_average", "ignore_index", "reduce", "reduction", "label_smoothing"};
  PyObject* v[10] = {};
  if (!bind_call(cross_entropy ? ce : nll, 2, 99, 0, args, kwargs, v)) return nullptr;
  at::Tensor input, target, weight;
  if (!meta_tensor(v[0], &input) || !meta_tensor(v[1], &target)) return nullptr;
  if (input.dim() != 2 || !at::isFloatingType(input.scalar_type()) || target.dim() != 1 || target.scalar_type() != at::kLong) return nullptr;
  if (!provably_equal(input.sym_size(0), target.sym_size(0))) return nullptr;
  if (!absent(v[2]) && !(meta_tensor(v[2], &weight) && weight.dim() == 1 && weight.scalar_type() == input.scalar_type() &&
                         provably_equal(weight.sym_size(0), input.sym_size(1))))
    return nullptr;
  if (!absent(v[3]) || !absent(v[5])) return nullptr;  // size_average, reduce
  if (v[4] && !PyLong_CheckExact(v[4])) return nullptr;  // ignore_index
  const char* reduction = v[6] ? (PyUnicode_Check(v[6]) ? PyUnicode_AsUTF8(v[6]) : nullptr) : "mean";
  if (!reduction) { PyErr_Clear(); return nullptr; }
  const bool none = std::strcmp(reduction, "none") == 0;
  if (!none && std::strcmp(reduction, "mean") != 0 && std::strcmp(reduction, "sum") != 0) return nullptr;
  if (cross_entropy && v[7] && !PyFloat_CheckExact(v[7]) && !PyLong_CheckExact(v[7])) return nullptr;  // label_smoothing
  const bool grad = c10::GradMode::is_enabled();
  at::Tensor result;
  {
    c10::AutoGradMode off(false);
    result = none ? at::empty_symint({input.sym_size(0)}, input.options()) : at::empty({}, input.options());
  }
  std::vector<at::Tensor> operands;
  for (const at::Tensor* t : {&input, &weight})
    if (t->defined() && t->requires_grad()) operands.push_back(*t);
  if (!attach_capture_autograd(result, operands, grad)) return nullptr;
  return THPVariable_Wrap(std::move(result));
}

}  // namespace

PyObject* probe_symbolic_meta(PyObject* target, const std::string& method, PyObject* args, PyObject* kwargs) {
  if (!PyTuple_Check(args) || (kwargs && !PyDict_Check(kwargs)) || c10::impl::TorchDispatchModeTLS::stack_len() > 0) return nullptr;
  if (PyObject* r = probe_symbolic_view(target, method, args, kwargs)) return r;
  if (!method.empty()) return probe_symbolic_fast_meta(target, method, args, kwargs);
  static PyObject* functional = PyImport_ImportModule("torch.nn.functional");
  if (!functional) { PyErr_Clear(); return nullptr; }
  static PyObject* cross_entropy = PyObject_GetAttrString(functional, "cross_entropy");
  static PyObject* nll_loss = PyObject_GetAttrString(functional, "nll_loss");
  if (!cross_entropy || !nll_loss) { PyErr_Clear(); return nullptr; }
  if (target != cross_entropy && target != nll_loss) return probe_symbolic_fast_meta(target, method, args, kwargs);
  try {
    return loss_meta(args, kwargs, target == cross_entropy);
  } catch (const std::exception&) {
    return nullptr;  // the Python path raises the operator's own error
  }
}

}  // namespace kiln::frontend
