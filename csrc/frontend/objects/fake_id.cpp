#include "frontend/objects/fake_id.h"

namespace kiln::frontend {

PyObject* fake_id_type() {
  // Never destroyed: it must outlive interpreter finalisation like the frontend's other statics.
  static PyObject* type = [] {
    PyObject* t = PyObject_CallFunction(reinterpret_cast<PyObject*>(&PyType_Type), "s(O){}", "kiln_fake_id",
                                        reinterpret_cast<PyObject*>(&PyLong_Type));
    if (!t) PyErr_Clear();
    return t;
  }();
  return type;
}

PyObject* new_fake_id(PyObject* token) {
  PyObject* type = fake_id_type();
  if (!type) return nullptr;
  PyObject* address = PyLong_FromVoidPtr(token);
  if (!address) return nullptr;
  PyObject* r = PyObject_CallOneArg(type, address);
  Py_DECREF(address);
  return r;
}

bool holds_fake_id(PyObject* o) {
  PyObject* type = fake_id_type();
  if (!type) return false;
  if (Py_TYPE(o) == reinterpret_cast<PyTypeObject*>(type)) return true;
  if (PyTuple_Check(o)) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(o); ++i)
      if (holds_fake_id(PyTuple_GET_ITEM(o, i))) return true;
    return false;
  }
  if (PyFrozenSet_Check(o)) {
    Py_ssize_t pos = 0;
    PyObject* key;
    Py_hash_t hash;
    while (_PySet_NextEntry(o, &pos, &key, &hash))
      if (holds_fake_id(key)) return true;
  }
  return false;
}

}  // namespace kiln::frontend
