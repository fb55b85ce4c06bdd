// An owning PyObject reference (RAII), used throughout the frontend.
#pragma once
#include <Python.h>
#include <utility>

namespace kiln::frontend {

class PyRef {
 public:
  PyRef() = default;
  static PyRef steal(PyObject* o) { PyRef r; r.p_ = o; return r; }
  static PyRef borrow(PyObject* o) { Py_XINCREF(o); return steal(o); }
  PyRef(const PyRef& o) : p_(o.p_) { Py_XINCREF(p_); }
  PyRef(PyRef&& o) noexcept : p_(o.p_) { o.p_ = nullptr; }
  PyRef& operator=(PyRef o) { std::swap(p_, o.p_); return *this; }
  ~PyRef() { Py_XDECREF(p_); }
  PyObject* get() const { return p_; }
  PyObject* release() { PyObject* o = p_; p_ = nullptr; return o; }
  explicit operator bool() const { return p_ != nullptr; }

 private:
  PyObject* p_ = nullptr;
};

}  // namespace kiln::frontend
