// Construction helpers for symbolic values, and the torch objects the frontend recognises.
#include "frontend/objects/variables.h"

#include <cstring>

#include "frontend/objects/fake_id.h"
#include "frontend/objects/torch_types.h"

namespace kiln::frontend {

TorchObjects g_torch;

static PyObject* attr(PyObject* o, const char* name) {
  return o ? PyObject_GetAttrString(o, name) : nullptr;
}

bool init_torch_objects() {
  TorchObjects t;
  t.torch = PyImport_ImportModule("torch");
  if (!t.torch) return false;
  PyObject* nn = PyImport_ImportModule("torch.nn");
  PyObject* mod_mod = PyImport_ImportModule("torch.nn.modules.module");
  t.operator_mod = PyImport_ImportModule("operator");
  t.builtins_mod = PyImport_ImportModule("builtins");
  PyObject* C = attr(t.torch, "_C");
  t.tensor_type = attr(t.torch, "Tensor");
  t.parameter_type = attr(nn, "Parameter");
  t.module_type = attr(nn, "Module");
  t.module_list_type = attr(nn, "ModuleList");
  t.dtype_type = attr(t.torch, "dtype");
  t.device_type = attr(t.torch, "device");
  t.layout_type = attr(t.torch, "layout");
  t.memory_format_type = attr(t.torch, "memory_format");
  t.size_type = attr(t.torch, "Size");
  t.no_grad = attr(t.torch, "no_grad");
  t.enable_grad = attr(t.torch, "enable_grad");
  t.set_grad_enabled = attr(t.torch, "set_grad_enabled");
  t.set_grad_enabled_fn = attr(C, "_set_grad_enabled");
  t.get_default_device = attr(t.torch, "get_default_device");
  t.from_numpy = attr(t.torch, "from_numpy");
  t.meta_device = t.device_type ? PyObject_CallFunction(t.device_type, "s", "meta") : nullptr;
  if (mod_mod) {
    const char* names[] = {"_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
                           "_global_backward_pre_hooks", "_global_forward_hooks_always_called"};
    t.global_hook_dicts = PyTuple_New(5);
    for (int i = 0; i < 5; ++i) {
      PyObject* d = attr(mod_mod, names[i]);
      if (!d) { PyErr_Clear(); d = PyDict_New(); }
      PyTuple_SET_ITEM(t.global_hook_dicts, i, d);
    }
  }
  Py_XDECREF(C);
  Py_XDECREF(nn);
  Py_XDECREF(mod_mod);
  if (PyErr_Occurred()) return false;
  g_torch = t;
  return true;
}

// numpy.<name> (a new reference, kept by the caller for the process), or null without an
// error set when numpy has not been imported by anyone: kiln never imports numpy itself.
static PyObject* numpy_attr(const char* attr) {
  PyRef name = PyRef::steal(PyUnicode_FromString("numpy"));
  PyRef mod = PyRef::steal(PyImport_GetModule(name.get()));
  PyObject* r = mod ? PyObject_GetAttrString(mod.get(), attr) : nullptr;
  if (!r) PyErr_Clear();
  return r;
}

// numpy's scalar types (numpy.number, numpy.bool_): immutable values like Python's own numbers.
bool is_numpy_scalar(PyObject* o) {
  if (std::strncmp(Py_TYPE(o)->tp_name, "numpy.", 6) != 0) return false;
  static PyObject* number = nullptr;
  static PyObject* boolean = nullptr;
  if (!number || !boolean) {
    if (!number) number = numpy_attr("number");
    if (!boolean) boolean = numpy_attr("bool_");
    if (!number || !boolean) return false;
  }
  return PyObject_TypeCheck(o, reinterpret_cast<PyTypeObject*>(number)) || PyObject_TypeCheck(o, reinterpret_cast<PyTypeObject*>(boolean));
}

bool is_numpy_array(PyObject* o) {
  if (std::strcmp(Py_TYPE(o)->tp_name, "numpy.ndarray") != 0) return false;
  static PyObject* ndarray = nullptr;
  if (!ndarray && !(ndarray = numpy_attr("ndarray"))) return false;
  return reinterpret_cast<PyObject*>(Py_TYPE(o)) == ndarray;
}

bool is_constant_like(PyObject* o) {
  if (o == Py_None || o == Py_Ellipsis || o == Py_NotImplemented || PyBool_Check(o) || PyLong_CheckExact(o) ||
      PyFloat_CheckExact(o) || PyComplex_CheckExact(o) || PyUnicode_CheckExact(o) || PyBytes_CheckExact(o) ||
      PyRange_Check(o) || PyCode_Check(o))
    return true;
  PyObject* t = reinterpret_cast<PyObject*>(Py_TYPE(o));
  if (PyLong_Check(o) && t == fake_id_type()) return true;  // an id() only the capture knows (fake_id.h)
  if (t == g_torch.dtype_type || t == g_torch.device_type || t == g_torch.layout_type ||
      t == g_torch.memory_format_type || is_numpy_scalar(o))
    return true;
  if (PySlice_Check(o)) {
    auto* s = reinterpret_cast<PySliceObject*>(o);
    return is_constant_like(s->start) && is_constant_like(s->stop) && is_constant_like(s->step);
  }
  if (PyTuple_CheckExact(o) || t == g_torch.size_type || PyFrozenSet_CheckExact(o)) {
    if (PyFrozenSet_CheckExact(o)) return true;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(o); ++i)
      if (!is_constant_like(PyTuple_GET_ITEM(o, i))) return false;
    return true;
  }
  return false;
}

VarPtr make_const(PyObject* o) {
  auto v = std::make_shared<Var>(VarKind::kConst);
  v->obj = PyRef::borrow(o);
  return v;
}

VarPtr make_object(PyObject* o, SourcePtr src) {
  auto v = std::make_shared<Var>(VarKind::kObject);
  v->obj = PyRef::borrow(o);
  v->source = std::move(src);
  return v;
}

VarPtr make_null() { return std::make_shared<Var>(VarKind::kNull); }

VarPtr make_seq(VarKind k, std::vector<VarPtr> items) {
  auto v = std::make_shared<Var>(k);
  v->items = std::move(items);
  return v;
}

VarPtr make_container_method(VarPtr self, std::string name) {
  auto m = std::make_shared<Var>(VarKind::kContainerMethod);
  m->self = std::move(self);
  m->name = std::move(name);
  return m;
}

const char* kind_name(VarKind k) {
  switch (k) {
    case VarKind::kTensor: return "tensor";
    case VarKind::kConst: return "constant";
    case VarKind::kTuple: return "tuple";
    case VarKind::kList: return "list";
    case VarKind::kDict: return "dict";
    case VarKind::kObject: return "object";
    case VarKind::kNull: return "NULL";
    case VarKind::kIterator: return "iterator";
    case VarKind::kCell: return "cell";
    case VarKind::kBoundMethod: return "bound method";
    case VarKind::kTensorMethod: return "tensor method";
    case VarKind::kContainerMethod: return "container method";
    case VarKind::kNestedFunction: return "nested function";
    case VarKind::kGradMode: return "grad-mode context";
    case VarKind::kGradModeExit: return "grad-mode exit";
    case VarKind::kAutocastExit: return "autocast exit";
    case VarKind::kGenerator: return "generator";
    case VarKind::kSuper: return "super";
    case VarKind::kNewObject: return "new object";
    case VarKind::kDictView: return "dict view";
    case VarKind::kPartial: return "functools.partial";
    case VarKind::kGenContext: return "contextmanager";
    case VarKind::kGenContextExit: return "contextmanager exit";
    case VarKind::kSymInt: return "symbolic int";
    case VarKind::kSymSlice: return "symbolic slice";
    case VarKind::kNdarray: return "numpy array";
    case VarKind::kGenFrame: return "generator (send)";
  }
  return "?";
}

}  // namespace kiln::frontend
