// Capture under autocast. Meta kernels know nothing of autocast (meta tensors carry no autocast
// dispatch key), so the capture saw float32 results where eager computes in bfloat16, and code
// that reads a dtype (`.to(query.dtype)`, `if x.dtype == torch.float16`) was captured with the
// wrong answer: a silently wrong result. The compiled graph itself was right (it is traced at the
// dispatcher, under the caller's autocast); only the capture's Python-visible dtypes were not.
//
// So where autocast is on for the operator's device, the operator runs once more on real tensors
// of zeros, one element per dimension (or, where an operator needs the real sizes, a view/reshape,
// the full sizes through an expanded zero), under the same autocast state and with the random
// generators' states put back; its results' dtypes replace the meta results'. Capture time only.
#include "frontend/interpreter/autocast/autocast_dtypes.h"

#include <cstring>
#include <functional>

#include "frontend/interpreter/interpreter_frame.h"
#include "frontend/objects/py_ref.h"
#include "frontend/objects/tensor_probe.h"
#include "frontend/objects/torch_types.h"

namespace kiln::frontend {

namespace {

// "cpu" or "cuda" when autocast is on for that device type, else "".
std::string autocast_on(PyObject* device) {
  PyRef type = PyRef::steal(PyObject_GetAttrString(device, "type"));
  if (!type || !PyUnicode_Check(type.get())) { PyErr_Clear(); return ""; }
  const std::string t = PyUnicode_AsUTF8(type.get());
  if (t != "cpu" && t != "cuda") return "";
  PyRef on = PyRef::steal(PyObject_CallMethod(g_torch.torch, "is_autocast_enabled", "s", t.c_str()));
  if (!on) { PyErr_Clear(); return ""; }
  return on.get() == Py_True ? t : "";
}

bool is_meta_tensor(PyObject* o) {
  if (!probe_is_tensor(o)) return false;
  PyRef m = PyRef::steal(PyObject_GetAttrString(o, "is_meta"));
  if (!m) { PyErr_Clear(); return false; }
  return m.get() == Py_True;
}

bool has_meta_tensor(PyObject* v) {
  if (is_meta_tensor(v)) return true;
  if (PyTuple_Check(v) || PyList_Check(v)) {
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(v); ++i)
      if (has_meta_tensor(PySequence_Fast_GET_ITEM(v, i))) return true;
  } else if (PyDict_Check(v)) {
    PyObject *k, *x;
    Py_ssize_t pos = 0;
    while (PyDict_Next(v, &pos, &k, &x))
      if (has_meta_tensor(x)) return true;
  }
  return false;
}

// `v` with `leaf` applied to each item of its tuples, lists and dict values (walked), or to `v`
// itself when it is none of those. New reference; nullptr with a Python error set if `leaf` fails.
PyObject* map_items(PyObject* v, const std::function<PyObject*(PyObject*)>& leaf) {
  if (PyTuple_CheckExact(v) || PyList_CheckExact(v)) {
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(v);
    PyRef out = PyRef::steal(PyTuple_CheckExact(v) ? PyTuple_New(n) : PyList_New(n));
    for (Py_ssize_t i = 0; i < n; ++i) {
      PyObject* e = leaf(PySequence_Fast_GET_ITEM(v, i));
      if (!e) return nullptr;
      if (PyTuple_CheckExact(v)) PyTuple_SET_ITEM(out.get(), i, e);
      else PyList_SET_ITEM(out.get(), i, e);
    }
    return out.release();
  }
  if (PyDict_CheckExact(v)) {
    PyRef out = PyRef::steal(PyDict_New());
    PyObject *k, *x;
    Py_ssize_t pos = 0;
    while (PyDict_Next(v, &pos, &k, &x)) {
      PyRef e = PyRef::steal(leaf(x));
      if (!e || PyDict_SetItem(out.get(), k, e.get()) < 0) return nullptr;
    }
    return out.release();
  }
  return Py_NewRef(v);
}

// meta.to(dtype); with symbolic sizes under PyTorch's Python dispatcher, as MetaExecutor runs meta
// kernels. New reference.
PyObject* meta_to(PyObject* meta, PyObject* dtype) {
  PyRef dispatcher;
  if (probe_is_symbolic_tensor(meta)) {
    PyObject* enable = module_attr("torch._C", "_EnablePythonDispatcher");
    dispatcher = enable ? PyRef::steal(PyObject_CallNoArgs(enable)) : PyRef();
    if (!dispatcher) return nullptr;
  }
  return PyObject_CallMethod(meta, "to", "O", dtype);
}

// A real stand-in for each meta tensor in `v` (tuples, lists and dict values walked), zeros of
// its dtype on `device`: one element per dimension, or its full sizes (`full`) as an expanded
// zero (no memory); the meta device named as an argument becomes `device`. With `hints`, symbolic
// sizes (of tensors, and given as arguments: `x.view(b, t, d)`) stand in as their values under the
// hints, guarding nothing (only the result's dtypes are read then). New reference; nullptr with a
// Python error set when a stand-in cannot be made (symbolic sizes without `hints`).
PyObject* stand_ins(PyObject* v, PyObject* device, bool full, bool hints) {
  int64_t hint;
  if (hints && probe_symbolic_hint(v, &hint)) return PyLong_FromLongLong(hint);
  if (is_meta_tensor(v)) {
    PyRef dtype = PyRef::steal(PyObject_GetAttrString(v, "dtype"));
    PyRef shape = PyRef::steal(PyObject_GetAttrString(v, "shape"));
    if (!dtype || !shape) return nullptr;
    const Py_ssize_t nd = PyTuple_Size(shape.get());
    if (nd < 0) return nullptr;
    PyRef sizes = PyRef::steal(PyTuple_New(nd));
    for (Py_ssize_t d = 0; d < nd; ++d) {
      PyObject* s = PyTuple_GET_ITEM(shape.get(), d);
      if (full && !PyLong_CheckExact(s) && !(hints && probe_symbolic_hint(s, &hint))) {
        PyErr_SetString(PyExc_TypeError, "symbolic sizes");
        return nullptr;
      }
      PyTuple_SET_ITEM(sizes.get(), d, !full ? PyLong_FromLong(1) : PyLong_CheckExact(s) ? Py_NewRef(s) : PyLong_FromLongLong(hint));
    }
    PyRef zeros = PyRef::steal(PyObject_GetAttrString(g_torch.torch, "zeros"));
    PyRef kw = PyRef::steal(Py_BuildValue("{sOsO}", "dtype", dtype.get(), "device", device));
    PyRef no_dims = PyRef::steal(PyTuple_New(0));
    PyRef zargs = PyRef::steal(PyTuple_Pack(1, full ? no_dims.get() : sizes.get()));
    if (!zeros || !kw || !zargs) return nullptr;
    PyObject* z = PyObject_Call(zeros.get(), zargs.get(), kw.get());
    if (!z || !full) return z;
    PyRef zr = PyRef::steal(z);
    // Full sizes stand in for the meta kernel itself (autocast_meta_result): the result requires
    // grad where eager's would.
    PyRef rg = PyRef::steal(PyObject_GetAttrString(v, "requires_grad"));
    if (rg && rg.get() == Py_True) zr = PyRef::steal(PyObject_CallMethod(zr.get(), "requires_grad_", nullptr));
    if (!zr) return nullptr;
    return PyObject_CallMethod(zr.get(), "expand", "O", sizes.get());
  }
  if (v == g_torch.meta_device) return Py_NewRef(device);
  return map_items(v, [&](PyObject* x) { return stand_ins(x, device, full, hints); });
}

// The call on stand-ins, with the generators' states as they were (a random operator draws).
PyObject* call_on_stand_ins(PyObject* target, const std::string& method, PyObject* args, PyObject* kwargs, PyObject* device,
                            const std::string& device_type, bool full, bool hints) {
  PyRef a = PyRef::steal(stand_ins(args, device, full, hints));
  if (!a) return nullptr;  // (the keywords' stand-ins are not made with its error pending)
  PyRef kw = kwargs ? PyRef::steal(stand_ins(kwargs, device, full, hints)) : PyRef();
  if (kwargs && !kw) return nullptr;
  PyRef rng_mod = PyRef::steal(PyImport_ImportModule(device_type == "cuda" ? "torch.cuda" : "torch.random"));
  PyRef rng = rng_mod ? PyRef::steal(PyObject_CallMethod(rng_mod.get(), "get_rng_state", nullptr)) : PyRef();
  if (!rng) return nullptr;
  PyObject* r;
  if (method.empty()) {
    r = PyObject_Call(target, a.get(), kw.get());
  } else {
    PyRef self_rest = PyRef::steal(PyTuple_GetSlice(a.get(), 1, PyTuple_GET_SIZE(a.get())));
    PyRef bound = PyRef::steal(PyObject_GetAttrString(PyTuple_GET_ITEM(a.get(), 0), method.c_str()));
    r = bound && self_rest ? PyObject_Call(bound.get(), self_rest.get(), kw.get()) : nullptr;
  }
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyRef put_back = PyRef::steal(PyObject_CallMethod(rng_mod.get(), "set_rng_state", "O", rng.get()));
  if (!put_back) PyErr_Clear();
  PyErr_Restore(type, value, tb);
  return r;
}

// A new sequence of v's kind holding `items` (a list): a list, a tuple, or a torch.return_types
// struct sequence.
PyObject* same_kind(PyObject* v, PyObject* items) {
  if (PyList_Check(v)) return Py_NewRef(items);
  PyRef t = PyRef::steal(PyList_AsTuple(items));
  if (!t || PyTuple_CheckExact(v)) return t.release();
  return PyObject_CallOneArg(reinterpret_cast<PyObject*>(Py_TYPE(v)), t.get());
}

// `meta` with the dtypes of `real` (same structure: a tensor, or a sequence of them); a new
// reference, `meta` itself where nothing changes.
PyObject* with_dtypes(PyObject* meta, PyObject* real) {
  if (probe_is_tensor(meta) && probe_is_tensor(real)) {
    PyRef md = PyRef::steal(PyObject_GetAttrString(meta, "dtype"));
    PyRef rd = PyRef::steal(PyObject_GetAttrString(real, "dtype"));
    if (!md || !rd) return nullptr;
    if (md.get() == rd.get()) return Py_NewRef(meta);
    return meta_to(meta, rd.get());
  }
  const bool tuples = PyTuple_Check(meta) && PyTuple_Check(real), lists = PyList_Check(meta) && PyList_Check(real);
  if (!(tuples || lists) || PySequence_Fast_GET_SIZE(meta) != PySequence_Fast_GET_SIZE(real)) return Py_NewRef(meta);
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(meta);
  PyRef items = PyRef::steal(PyList_New(n));
  bool changed = false;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* e = with_dtypes(PySequence_Fast_GET_ITEM(meta, i), PySequence_Fast_GET_ITEM(real, i));
    if (!e) return nullptr;
    changed |= e != PySequence_Fast_GET_ITEM(meta, i);
    PyList_SET_ITEM(items.get(), i, e);
  }
  return changed ? same_kind(meta, items.get()) : Py_NewRef(meta);
}

// Each real tensor in `v` as a meta tensor of its metadata (probe_make_meta).
PyObject* as_meta(PyObject* v) {
  if (probe_is_tensor(v)) return probe_make_meta(v);
  if (!PyTuple_Check(v) && !PyList_Check(v)) return Py_NewRef(v);
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(v);
  PyRef items = PyRef::steal(PyList_New(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* e = as_meta(PySequence_Fast_GET_ITEM(v, i));
    if (!e) return nullptr;
    PyList_SET_ITEM(items.get(), i, e);
  }
  return same_kind(v, items.get());
}

// `v` (tuples, lists and dict values walked) with each floating meta tensor but float64 cast to
// `dtype`, as autocast casts the operands of its lower-precision ops. New reference.
PyObject* cast_to_autocast(PyObject* v, PyObject* dtype) {
  if (!is_meta_tensor(v)) return map_items(v, [&](PyObject* x) { return cast_to_autocast(x, dtype); });
  PyRef fp = PyRef::steal(PyObject_CallMethod(v, "is_floating_point", nullptr));
  PyRef d = PyRef::steal(PyObject_GetAttrString(v, "dtype"));
  if (!fp || !d) return nullptr;
  if (fp.get() != Py_True || d.get() == dtype || d.get() == module_attr("torch", "float64")) return Py_NewRef(v);
  return meta_to(v, dtype);
}

}  // namespace

PyObject* autocast_meta_result(PyObject* target, const std::string& method, PyObject* args, PyObject* kwargs, PyObject* device,
                               const std::function<PyObject*(PyObject* args, PyObject* kwargs)>& run_meta) {
  const std::string type = device ? autocast_on(device) : "";
  if (type.empty()) return nullptr;
  // Its sizes are the result's: symbolic ones cannot stand in (their hints would become constants).
  PyRef real = PyRef::steal(call_on_stand_ins(target, method, args, kwargs, device, type, true, false));
  PyObject* r = real ? as_meta(real.get()) : nullptr;
  PyErr_Clear();
  if (r) return r;
  PyRef dtype = PyRef::steal(PyObject_CallMethod(g_torch.torch, "get_autocast_dtype", "s", type.c_str()));
  PyRef cast_args = dtype ? PyRef::steal(cast_to_autocast(args, dtype.get())) : PyRef();
  PyRef cast_kwargs = cast_args && kwargs ? PyRef::steal(cast_to_autocast(kwargs, dtype.get())) : PyRef();
  if (cast_args && (!kwargs || cast_kwargs)) r = run_meta(cast_args.get(), cast_kwargs.get());
  PyErr_Clear();
  return r;
}

PyObject* autocast_result(PyObject* meta_result, PyObject* target, const std::string& method, PyObject* args, PyObject* kwargs,
                          PyObject* device, std::string* why) {
  if (!device) return Py_NewRef(meta_result);
  const std::string type = autocast_on(device);
  if (type.empty() || !(has_meta_tensor(args) || (kwargs && has_meta_tensor(kwargs)))) return Py_NewRef(meta_result);
  PyRef real = PyRef::steal(call_on_stand_ins(target, method, args, kwargs, device, type, false, true));
  if (!real) {
    PyErr_Clear();
    real = PyRef::steal(call_on_stand_ins(target, method, args, kwargs, device, type, true, true));
  }
  PyObject* r = real ? with_dtypes(meta_result, real.get()) : nullptr;
  if (!r) *why = take_python_error();
  return r;
}

}  // namespace kiln::frontend
