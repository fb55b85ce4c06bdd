// View operators (and factories) on meta tensors with symbolic sizes, in C++ (see
// probe_symbolic_view in frontend/objects/tensor_probe.h).
//
// With symbolic sizes the capture runs operators under PyTorch's Python dispatcher, where view,
// transpose, split and the rest are Python references (torch._refs) that check their arguments
// with torch._check: a few hundred microseconds each, and the first one imports
// torch.fx.experimental.symbolic_shapes and sympy. A view's result is its operand's storage with
// other sizes and strides, which follow from the operand's alone: here they are computed with
// SymInts and the view is made by as_strided (ATen's C++ meta kernel, a real view: same storage,
// autograd view metadata). Only what is provable without a guard is answered: view of an operand
// whose strides allow it, with a size product provably equal to its own (reshape: a copy where
// they do not); expand of dimensions of size 1; split along a static dimension. Factories of
// symbolic sizes (torch.ones(t, t), a causal mask) are answered here too, their result following
// from the arguments alone; basic indexing (x[..., :half], x[:, -1]) too, guarding what PyTorch's
// indexing would; squeeze and dropout by PyTorch's own C++ code for them (native_call). Everything
// else, and every error, takes the Python path, which guards what it needs and raises the
// operator's own errors.
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <c10/core/impl/PythonDispatcherTLS.h>
#include <torch/csrc/Device.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Layout.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/csrc/utils/python_symnode.h>

#include <cstring>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "frontend/objects/py_ref.h"
#include "frontend/objects/tensor_probe.h"
#include "python/call_binding.h"
#include "python/capture_autograd.h"
#include "torch_bridge/sym_node.h"

namespace kiln::frontend {

namespace {

using SymInts = std::vector<c10::SymInt>;

// kIndex (operator.getitem) and kNative: PyTorch's own C++ code, run with the Python dispatcher
// off (see native_call).
enum class View { kView, kReshape, kTranspose, kPermute, kT, kUnsqueeze, kSplit, kContiguous, kFlatten, kExpand, kFactory, kIndex, kNative };

using bridge::provably_equal;
using bridge::provably_unequal;

bool provably_one(const c10::SymInt& x) { return !x.is_heap_allocated() && x.as_int_unchecked() == 1; }

// Row-major contiguity (size-1 dimensions' strides are free), where it holds or fails for every
// value of the sizes; unknown where that would take a guard.
enum class Contiguity { kYes, kNo, kUnknown };
Contiguity contiguity(const at::Tensor& t) {
  c10::SymInt expected(1);
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    const c10::SymInt& size = t.sym_size(d);
    if (provably_one(size)) continue;
    if (provably_unequal(t.sym_stride(d), expected)) return Contiguity::kNo;
    if (!provably_equal(t.sym_stride(d), expected)) return Contiguity::kUnknown;
    expected = expected * size;
  }
  return Contiguity::kYes;
}
bool provably_contiguous(const at::Tensor& t) { return contiguity(t) == Contiguity::kYes; }

SymInts contiguous_strides(const SymInts& sizes) {
  SymInts strides(sizes.size(), c10::SymInt(1));
  c10::SymInt inner(1);
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = inner;
    inner = inner * sizes[i];
  }
  return strides;
}

bool as_symint(PyObject* o, c10::SymInt* out) {
  if (PyLong_CheckExact(o)) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) { PyErr_Clear(); return false; }
    *out = c10::SymInt(v);
    return true;
  }
  if (!torch::is_symint(o)) return false;
  *out = py::handle(o).cast<c10::SymInt>();
  return true;
}

// Sizes given as `*sizes` or as one sequence (view(2, 3), view((2, 3)), view(x.shape)).
bool as_sizes(PyObject* args, Py_ssize_t first, SymInts* out) {
  const Py_ssize_t n = PyTuple_GET_SIZE(args);
  PyObject* seq = args;
  Py_ssize_t from = first;
  if (n == first + 1 && (PyTuple_Check(PyTuple_GET_ITEM(args, first)) || PyList_Check(PyTuple_GET_ITEM(args, first)))) {
    seq = PyTuple_GET_ITEM(args, first);
    from = 0;
  }
  const Py_ssize_t m = PySequence_Fast_GET_SIZE(seq);
  for (Py_ssize_t i = from; i < m; ++i) {
    c10::SymInt s;
    if (!as_symint(PySequence_Fast_GET_ITEM(seq, i), &s)) return false;
    out->push_back(s);
  }
  return true;
}

bool as_dim(PyObject* o, int64_t ndim, int64_t* d) {
  if (!o || !PyLong_CheckExact(o)) return false;
  int64_t v = PyLong_AsLongLong(o);
  if (v == -1 && PyErr_Occurred()) { PyErr_Clear(); return false; }
  const int64_t n = std::max<int64_t>(ndim, 1);
  if (v < -n || v >= n) return false;
  *d = v < 0 ? v + n : v;
  return true;
}

// The sizes of a view of `t` as `requested` (one may be -1), where the element count is provably
// the same; false otherwise.
bool view_sizes(const at::Tensor& t, const SymInts& requested, SymInts* out) {
  int infer = -1;
  for (size_t i = 0; i < requested.size(); ++i) {
    if (!requested[i].is_heap_allocated() && requested[i].as_int_unchecked() == -1) {
      if (infer >= 0) return false;
      infer = static_cast<int>(i);
    } else if (!requested[i].is_heap_allocated() && requested[i].as_int_unchecked() < 0) {
      return false;
    }
  }
  *out = requested;
  c10::SymInt numel(1);
  for (const auto& s : t.sym_sizes()) numel = numel * s;
  if (infer >= 0) {
    // -1: the operand's sizes that no requested size provably equals, over the requested sizes
    // left, which must be static (view(b, t, -1, 64) of [b, t, 768]: 768 / 64).
    std::vector<bool> used(static_cast<size_t>(t.dim()), false);
    c10::SymInt rest(1);
    int64_t divisor = 1;
    for (size_t i = 0; i < requested.size(); ++i) {
      if (static_cast<int>(i) == infer) continue;
      bool matched = false;
      for (int64_t d = 0; d < t.dim() && !matched; ++d)
        if (!used[static_cast<size_t>(d)] && provably_equal(t.sym_size(d), requested[i])) used[static_cast<size_t>(d)] = matched = true;
      if (matched) continue;
      if (requested[i].is_heap_allocated() || requested[i].as_int_unchecked() == 0) return false;
      divisor *= requested[i].as_int_unchecked();
    }
    for (int64_t d = 0; d < t.dim(); ++d)
      if (!used[static_cast<size_t>(d)]) rest = rest * t.sym_size(d);
    (*out)[static_cast<size_t>(infer)] = rest / c10::SymInt(divisor);
  }
  c10::SymInt product(1);
  for (const auto& s : *out) product = product * s;
  return provably_equal(product, numel);
}

// The strides of a view of `t` with `sizes` (the same element count), as ATen's view computes
// them: the operand's dimensions fall into chunks that are contiguous with each other, and the
// view's dimensions must each lie within one chunk. False where that does not hold, or where
// deciding it would need a guard.
bool view_strides(const at::Tensor& t, const SymInts& sizes, SymInts* strides) {
  strides->assign(sizes.size(), c10::SymInt(0));
  if (t.dim() == 0) {
    for (auto& s : *strides) s = c10::SymInt(1);
    return true;
  }
  int64_t view_d = static_cast<int64_t>(sizes.size()) - 1;
  c10::SymInt chunk_stride = t.sym_stride(t.dim() - 1);
  c10::SymInt tensor_numel(1), view_numel(1);
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    tensor_numel = tensor_numel * t.sym_size(d);
    bool chunk_end = d == 0;
    if (!chunk_end && !provably_one(t.sym_size(d - 1))) {
      const c10::SymInt joined = tensor_numel * chunk_stride;
      if (provably_unequal(t.sym_stride(d - 1), joined)) chunk_end = true;
      else if (!provably_equal(t.sym_stride(d - 1), joined)) return false;
    }
    if (!chunk_end) continue;
    while (view_d >= 0 && (!provably_equal(view_numel, tensor_numel) || provably_one(sizes[static_cast<size_t>(view_d)]))) {
      (*strides)[static_cast<size_t>(view_d)] = view_numel * chunk_stride;
      view_numel = view_numel * sizes[static_cast<size_t>(view_d)];
      --view_d;
    }
    if (!provably_equal(view_numel, tensor_numel)) return false;
    if (d > 0) {
      chunk_stride = t.sym_stride(d - 1);
      tensor_numel = c10::SymInt(1);
      view_numel = c10::SymInt(1);
    }
  }
  return view_d == -1;
}

bool all_static(const at::Tensor& t, const SymInts& sizes) {
  for (const auto& s : sizes)
    if (s.is_heap_allocated()) return false;
  for (const auto& s : t.sym_sizes())
    if (s.is_heap_allocated()) return false;
  for (const auto& s : t.sym_strides())
    if (s.is_heap_allocated()) return false;
  return true;
}

at::Tensor strided_view(const at::Tensor& t, const SymInts& sizes, const SymInts& strides, const c10::SymInt& offset) {
  return t.as_strided_symint(sizes, strides, offset);
}

PyObject* wrap(at::Tensor t) { return THPVariable_Wrap(std::move(t)); }

// A copy of `t` with `sizes`: a new contiguous tensor (not a view), with the autograd metadata
// eager gives it (contiguous() of a strided tensor, reshape where no view exists).
PyObject* wrap_copy(const at::Tensor& t, const SymInts& sizes) {
  at::Tensor out;
  {
    at::AutoDispatchBelowADInplaceOrView below;
    c10::AutoGradMode off(false);
    out = at::empty_symint(sizes, t.options().requires_grad(false));
  }
  std::vector<at::Tensor> operands;
  if (t.requires_grad()) operands.push_back(t);
  if (!attach_capture_autograd(out, operands, c10::GradMode::is_enabled())) return nullptr;
  return wrap(std::move(out));
}

// torch.ones / zeros / empty(*sizes, dtype=, device=meta, ...): a new contiguous tensor (the
// capture passes device=meta to factories). Other devices, layouts, requires_grad=True, out=,
// pinned memory and memory formats take the Python path.
PyObject* factory_call(PyObject* args, PyObject* kwargs) {
  SymInts sizes;
  if (PyTuple_GET_SIZE(args) < 1 || !as_sizes(args, 0, &sizes)) return nullptr;
  for (const auto& s : sizes)
    if (!s.is_heap_allocated() && s.as_int_unchecked() < 0) return nullptr;
  at::ScalarType dtype = c10::get_default_dtype_as_scalartype();
  bool meta = false;
  if (kwargs) {
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(kwargs, &pos, &k, &v)) {
      const char* key = PyUnicode_Check(k) ? PyUnicode_AsUTF8(k) : nullptr;
      if (!key) { PyErr_Clear(); return nullptr; }
      if (std::strcmp(key, "dtype") == 0) {
        if (THPDtype_Check(v)) dtype = reinterpret_cast<THPDtype*>(v)->scalar_type;
        else if (v != Py_None) return nullptr;
      } else if (std::strcmp(key, "device") == 0) {
        if (THPDevice_Check(v)) meta = reinterpret_cast<THPDevice*>(v)->device.is_meta();
        else if (PyUnicode_Check(v)) meta = PyUnicode_CompareWithASCIIString(v, "meta") == 0;
        else return nullptr;
      } else if (std::strcmp(key, "layout") == 0) {
        if (v != Py_None && !(THPLayout_Check(v) && reinterpret_cast<THPLayout*>(v)->layout == at::kStrided)) return nullptr;
      } else if (std::strcmp(key, "requires_grad") == 0 || std::strcmp(key, "pin_memory") == 0) {
        if (v != Py_False && v != Py_None) return nullptr;
      } else {
        return nullptr;
      }
    }
  }
  if (!meta) return nullptr;
  c10::AutoGradMode off(false);
  return wrap(at::empty_symint(sizes, at::TensorOptions().dtype(dtype).device(at::kMeta)));
}

// One item of basic indexing: an int, a slice of ints / SymInts / None, None or Ellipsis (no
// tensors, lists or bools: advanced indexing copies).
struct IndexItem {
  enum Kind { kInt, kSlice, kNone, kEllipsis } kind;
  c10::SymInt value;                       // kInt
  std::optional<c10::SymInt> start, stop;  // kSlice
  int64_t step = 1;
};

// Ints far beyond any size (slicing's open end written as sys.maxsize) take the Python path:
// expressions over them could overflow.
bool index_int(PyObject* o, c10::SymInt* out) {
  if (!as_symint(o, out)) return false;
  if (out->is_heap_allocated()) return true;
  const int64_t v = out->as_int_unchecked();
  return v > -(int64_t{1} << 40) && v < (int64_t{1} << 40);
}

bool index_item(PyObject* o, std::vector<IndexItem>* out) {
  IndexItem item{IndexItem::kNone};
  if (o == Py_Ellipsis) {
    item.kind = IndexItem::kEllipsis;
  } else if (PyLong_CheckExact(o) || torch::is_symint(o)) {
    item.kind = IndexItem::kInt;
    if (!index_int(o, &item.value)) return false;
  } else if (PySlice_Check(o)) {
    auto* sl = reinterpret_cast<PySliceObject*>(o);
    item.kind = IndexItem::kSlice;
    c10::SymInt v;
    if (sl->start != Py_None) {
      if (!index_int(sl->start, &v)) return false;
      item.start = v;
    }
    if (sl->stop != Py_None) {
      if (!index_int(sl->stop, &v)) return false;
      item.stop = v;
    }
    if (sl->step != Py_None) {  // a static positive step; anything else takes the Python path
      if (!PyLong_CheckExact(sl->step)) return false;
      item.step = PyLong_AsLongLong(sl->step);
      if (item.step <= 0) { PyErr_Clear(); return false; }
    }
  } else if (o != Py_None) {
    return false;
  }
  out->push_back(std::move(item));
  return true;
}

// A question about sizes, answered as PyTorch's own indexing code asks it: kiln's SymNode
// guards on it where it is symbolic.
bool holds(const c10::SymBool& b) { return b.guard_bool(__FILE__, __LINE__); }

// x[index] for basic indexing, as ATen's indexing computes it (select, slice, unsqueeze, in the
// order of the items; Ellipsis skips the dimensions the other items leave), made by one
// as_strided: a view of x. ATen's own slice kernel reads concrete sizes, so with symbolic sizes
// Tensor.__getitem__ cannot run in C++ (PyTorch raises an internal assertion, and its Python path
// imported sympy for every x[..., :32] of rotary embeddings). False where an index is out of
// range or malformed: the Python path raises the error eager raises.
bool basic_index_view(const at::Tensor& t, PyObject* index, at::Tensor* out) {
  std::vector<IndexItem> items;
  if (PyTuple_Check(index)) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(index); ++i)
      if (!index_item(PyTuple_GET_ITEM(index, i), &items)) return false;
  } else if (!index_item(index, &items)) {
    return false;
  }
  int64_t specified = 0, ellipses = 0;
  for (const auto& item : items) {
    specified += item.kind == IndexItem::kInt || item.kind == IndexItem::kSlice;
    ellipses += item.kind == IndexItem::kEllipsis;
  }
  if (specified > t.dim() || ellipses > 1) return false;
  SymInts sizes(t.sym_sizes().begin(), t.sym_sizes().end()), strides(t.sym_strides().begin(), t.sym_strides().end());
  c10::SymInt offset = t.sym_storage_offset();
  size_t d = 0;  // the result's dimension the next item applies to
  for (const auto& item : items) {
    switch (item.kind) {
      case IndexItem::kEllipsis:
        d += static_cast<size_t>(t.dim() - specified);
        break;
      case IndexItem::kNone: {
        const c10::SymInt stride = d < sizes.size() ? sizes[d] * strides[d] : c10::SymInt(1);
        sizes.insert(sizes.begin() + static_cast<std::ptrdiff_t>(d), c10::SymInt(1));
        strides.insert(strides.begin() + static_cast<std::ptrdiff_t>(d), stride);
        ++d;
        break;
      }
      case IndexItem::kInt: {
        const c10::SymInt& length = sizes[d];
        if (holds(item.value.sym_ge(length)) || holds(item.value.sym_lt(-length))) return false;  // IndexError
        const c10::SymInt i = holds(item.value.sym_lt(0)) ? item.value + length : item.value;
        offset = offset + i * strides[d];
        sizes.erase(sizes.begin() + static_cast<std::ptrdiff_t>(d));
        strides.erase(strides.begin() + static_cast<std::ptrdiff_t>(d));
        break;
      }
      case IndexItem::kSlice: {
        // ATen's clamping, asked only about the bounds given (x[:, :k] asks nothing about k's
        // start, x[k:] nothing about its stop: an open end is the length, after any start).
        const c10::SymInt length = sizes[d];
        c10::SymInt start(0), stop = length;
        if (item.start) {
          start = *item.start;
          if (holds(start.sym_lt(0))) start = start + length;
          if (holds(start.sym_lt(0))) start = c10::SymInt(0);
          else if (holds(start.sym_ge(length))) start = length;
        }
        if (item.stop) {
          stop = *item.stop;
          if (holds(stop.sym_lt(0))) stop = stop + length;
          if (holds(stop.sym_lt(start))) stop = start;
          else if (holds(stop.sym_ge(length))) stop = length;
        }
        offset = offset + start * strides[d];
        sizes[d] = item.step == 1 ? stop - start : (stop - start + (item.step - 1)) / c10::SymInt(item.step);
        strides[d] = strides[d] * item.step;
        ++d;
        break;
      }
    }
  }
  *out = strided_view(t, sizes, strides, offset);
  return true;
}

// Basic indexing (x[:, None, -1], x[..., :t]), squeeze and dropout (torch.dropout and
// F.dropout: in eval mode it returns its input): indexing by basic_index_view, the others by
// PyTorch's C++ code for them (SymInt-aware, made by as_strided) with the Python dispatcher off.
// Each question that code asks about a symbolic size is answered by kiln's SymNode, which guards
// on it as the Python path would; an operator inside that needs concrete sizes raises, and the
// call takes the Python path.
PyObject* native_call(View op, PyObject* target, const std::string& method, PyObject* args, PyObject* kwargs) {
  if (op == View::kIndex) {  // operator.getitem(x, index)
    at::Tensor view;
    if (PyTuple_GET_SIZE(args) != 2 || kwargs || !basic_index_view(THPVariable_Unpack(PyTuple_GET_ITEM(args, 0)), PyTuple_GET_ITEM(args, 1), &view))
      return nullptr;
    return wrap(std::move(view));
  }
  if (method.empty()) return PyObject_Call(target, args, kwargs);
  PyRef fn = PyRef::steal(PyObject_GetAttrString(PyTuple_GET_ITEM(args, 0), method.c_str()));
  if (!fn) return nullptr;
  PyRef rest = PyRef::steal(PyTuple_GetSlice(args, 1, PyTuple_GET_SIZE(args)));
  if (!rest) return nullptr;
  return PyObject_Call(fn.get(), rest.get(), kwargs);
}

PyObject* view_call(View op, const at::Tensor& t, PyObject* args, PyObject* kwargs) {
  const int64_t n = t.dim();
  const Py_ssize_t nargs = PyTuple_GET_SIZE(args);
  auto no_kwargs = [&] { return !kwargs || PyDict_GET_SIZE(kwargs) == 0; };
  switch (op) {
    case View::kView:
    case View::kReshape: {
      SymInts requested, sizes;
      if (!no_kwargs() || nargs < 2 || !as_sizes(args, 1, &requested) || !view_sizes(t, requested, &sizes)) return nullptr;
      if (provably_contiguous(t)) return wrap(strided_view(t, sizes, contiguous_strides(sizes), t.sym_storage_offset()));
      SymInts strides;
      if (view_strides(t, sizes, &strides)) return wrap(strided_view(t, sizes, strides, t.sym_storage_offset()));
      // reshape copies where no view exists; that is decided here only for static sizes and
      // strides (a symbolic case the view rule cannot prove takes the Python path).
      if (op == View::kView || !all_static(t, sizes)) return nullptr;
      return wrap_copy(t, sizes);
    }
    case View::kFlatten: {
      PyObject* v[3] = {};
      if (!bind_call({"self", "start_dim", "end_dim"}, 1, 3, 1, args, kwargs, v)) return nullptr;
      int64_t start = 0, end = n - 1;
      if ((v[1] && !as_dim(v[1], n, &start)) || (v[2] && !as_dim(v[2], n, &end)) || start > end || n == 0) return nullptr;
      if (!provably_contiguous(t)) return nullptr;
      SymInts sizes;
      c10::SymInt folded(1);
      for (int64_t d = 0; d < n; ++d) {
        if (d < start || d > end) sizes.push_back(t.sym_size(d));
        else folded = folded * t.sym_size(d);
        if (d == end) sizes.push_back(folded);
      }
      if (start == end) return Py_NewRef(PyTuple_GET_ITEM(args, 0));  // flatten of one dimension is self
      return wrap(strided_view(t, sizes, contiguous_strides(sizes), t.sym_storage_offset()));
    }
    case View::kTranspose: {
      PyObject* v[3] = {};
      int64_t a = 0, b = 0;
      if (!bind_call({"self", "dim0", "dim1"}, 3, 3, 1, args, kwargs, v) || !as_dim(v[1], n, &a) || !as_dim(v[2], n, &b) || n == 0)
        return nullptr;
      SymInts sizes(t.sym_sizes().begin(), t.sym_sizes().end()), strides(t.sym_strides().begin(), t.sym_strides().end());
      std::swap(sizes[static_cast<size_t>(a)], sizes[static_cast<size_t>(b)]);
      std::swap(strides[static_cast<size_t>(a)], strides[static_cast<size_t>(b)]);
      return wrap(strided_view(t, sizes, strides, t.sym_storage_offset()));
    }
    case View::kT: {
      if (!no_kwargs() || nargs != 1 || n > 2) return nullptr;
      if (n < 2) return wrap(strided_view(t, t.sym_sizes().vec(), t.sym_strides().vec(), t.sym_storage_offset()));
      return wrap(strided_view(t, {t.sym_size(1), t.sym_size(0)}, {t.sym_stride(1), t.sym_stride(0)}, t.sym_storage_offset()));
    }
    case View::kPermute: {
      if (!no_kwargs() || nargs < 2) return nullptr;
      PyObject* seq = args;
      Py_ssize_t from = 1;
      if (nargs == 2 && (PyTuple_Check(PyTuple_GET_ITEM(args, 1)) || PyList_Check(PyTuple_GET_ITEM(args, 1)))) {
        seq = PyTuple_GET_ITEM(args, 1);
        from = 0;
      }
      if (PySequence_Fast_GET_SIZE(seq) - from != n) return nullptr;
      std::vector<bool> seen(static_cast<size_t>(n), false);
      SymInts sizes, strides;
      for (Py_ssize_t i = from; i < PySequence_Fast_GET_SIZE(seq); ++i) {
        int64_t d = 0;
        if (!as_dim(PySequence_Fast_GET_ITEM(seq, i), n, &d) || seen[static_cast<size_t>(d)]) return nullptr;
        seen[static_cast<size_t>(d)] = true;
        sizes.push_back(t.sym_size(d));
        strides.push_back(t.sym_stride(d));
      }
      return wrap(strided_view(t, sizes, strides, t.sym_storage_offset()));
    }
    case View::kUnsqueeze: {
      PyObject* v[2] = {};
      if (!bind_call({"self", "dim"}, 2, 2, 1, args, kwargs, v) || !v[1] || !PyLong_CheckExact(v[1])) return nullptr;
      int64_t d = PyLong_AsLongLong(v[1]);
      if (d == -1 && PyErr_Occurred()) { PyErr_Clear(); return nullptr; }
      if (d < -(n + 1) || d > n) return nullptr;
      if (d < 0) d += n + 1;
      SymInts sizes(t.sym_sizes().begin(), t.sym_sizes().end()), strides(t.sym_strides().begin(), t.sym_strides().end());
      const c10::SymInt stride = d < n ? sizes[static_cast<size_t>(d)] * strides[static_cast<size_t>(d)] : c10::SymInt(1);
      sizes.insert(sizes.begin() + d, c10::SymInt(1));
      strides.insert(strides.begin() + d, stride);
      return wrap(strided_view(t, sizes, strides, t.sym_storage_offset()));
    }
    case View::kSplit: {
      PyObject* v[3] = {};
      int64_t d = 0;
      if (!bind_call({"self", "split_size", "dim"}, 2, 3, 1, args, kwargs, v) || !v[1] || !PyLong_CheckExact(v[1])) return nullptr;
      if (v[2] ? !as_dim(v[2], n, &d) : n == 0) return nullptr;
      const int64_t piece = PyLong_AsLongLong(v[1]);
      if (piece <= 0) { PyErr_Clear(); return nullptr; }
      const c10::SymInt& length = t.sym_size(d);
      if (length.is_heap_allocated()) return nullptr;  // how many pieces would depend on a symbol
      const int64_t total = length.as_int_unchecked();
      const int64_t count = total == 0 ? 1 : (total + piece - 1) / piece;
      PyRef out = PyRef::steal(PyTuple_New(count));
      if (!out) throw py::error_already_set();
      for (int64_t i = 0; i < count; ++i) {
        SymInts sizes(t.sym_sizes().begin(), t.sym_sizes().end());
        sizes[static_cast<size_t>(d)] = c10::SymInt(std::min(piece, total - i * piece));
        const c10::SymInt offset = t.sym_storage_offset() + t.sym_stride(d) * (i * piece);
        PyTuple_SET_ITEM(out.get(), i, wrap(strided_view(t, sizes, t.sym_strides().vec(), offset)));
      }
      return out.release();
    }
    case View::kExpand: {
      // New leading dimensions and dimensions of size 1 get the requested size and stride 0; -1,
      // or a size provably the operand's, keeps the dimension.
      SymInts requested;
      if (!no_kwargs() || nargs < 2 || !as_sizes(args, 1, &requested) || static_cast<int64_t>(requested.size()) < n) return nullptr;
      const size_t lead = requested.size() - static_cast<size_t>(n);
      SymInts sizes, strides;
      for (size_t i = 0; i < requested.size(); ++i) {
        const c10::SymInt& want = requested[i];
        const bool keep = !want.is_heap_allocated() && want.as_int_unchecked() == -1;
        if (i < lead) {
          if (keep || (!want.is_heap_allocated() && want.as_int_unchecked() < 0)) return nullptr;
          sizes.push_back(want);
          strides.push_back(c10::SymInt(0));
          continue;
        }
        const int64_t d = static_cast<int64_t>(i - lead);
        if (keep || provably_equal(t.sym_size(d), want)) {
          sizes.push_back(t.sym_size(d));
          strides.push_back(t.sym_stride(d));
        } else if (provably_one(t.sym_size(d)) && (want.is_heap_allocated() || want.as_int_unchecked() >= 0)) {
          sizes.push_back(want);
          strides.push_back(c10::SymInt(0));
        } else {
          return nullptr;
        }
      }
      return wrap(strided_view(t, sizes, strides, t.sym_storage_offset()));
    }
    case View::kFactory:
    case View::kIndex:
    case View::kNative:
      return nullptr;
    case View::kContiguous: {
      if (!no_kwargs() || nargs != 1) return nullptr;
      switch (contiguity(t)) {
        case Contiguity::kYes: return Py_NewRef(PyTuple_GET_ITEM(args, 0));  // eager returns self
        case Contiguity::kNo: return wrap_copy(t, t.sym_sizes().vec());
        default: return nullptr;  // deciding would take a guard: the Python path
      }
    }
  }
  return nullptr;
}

const std::unordered_map<std::string, View>& view_methods() {
  static const std::unordered_map<std::string, View> m = {
      {"view", View::kView}, {"reshape", View::kReshape}, {"transpose", View::kTranspose}, {"swapaxes", View::kTranspose},
      {"permute", View::kPermute}, {"t", View::kT}, {"unsqueeze", View::kUnsqueeze}, {"split", View::kSplit},
      {"contiguous", View::kContiguous}, {"flatten", View::kFlatten}, {"expand", View::kExpand}, {"squeeze", View::kNative}};
  return m;
}

const std::unordered_map<PyObject*, View>& view_functions() {
  static const auto* m = [] {
    auto* out = new std::unordered_map<PyObject*, View>();
    PyRef torch = PyRef::steal(PyImport_ImportModule("torch"));
    if (!torch) { PyErr_Clear(); return out; }
    for (const auto& [name, op] : {std::pair<const char*, View>{"reshape", View::kReshape}, {"transpose", View::kTranspose},
                                   {"swapaxes", View::kTranspose}, {"permute", View::kPermute}, {"t", View::kT},
                                   {"unsqueeze", View::kUnsqueeze}, {"flatten", View::kFlatten}, {"ones", View::kFactory},
                                   {"zeros", View::kFactory}, {"empty", View::kFactory}, {"dropout", View::kNative}}) {
      if (PyObject* f = PyObject_GetAttrString(torch.get(), name)) out->emplace(f, op);  // kept alive for the process
      else PyErr_Clear();
    }
    for (const auto& [module, name, op] : {std::tuple<const char*, const char*, View>{"operator", "getitem", View::kIndex},
                                           {"torch.nn.functional", "dropout", View::kNative}}) {
      PyRef mod = PyRef::steal(PyImport_ImportModule(module));
      if (PyObject* f = mod ? PyObject_GetAttrString(mod.get(), name) : nullptr) out->emplace(f, op);
      else PyErr_Clear();
    }
    return out;
  }();
  return *m;
}

}  // namespace

PyObject* probe_symbolic_view(PyObject* target, const std::string& method, PyObject* args, PyObject* kwargs) {
  View op;
  if (!method.empty()) {
    auto it = view_methods().find(method);
    if (it == view_methods().end()) return nullptr;
    op = it->second;
  } else {
    auto it = view_functions().find(target);
    if (it == view_functions().end()) return nullptr;
    op = it->second;
  }
  if (!PyTuple_Check(args) || PyTuple_GET_SIZE(args) < 1 || (kwargs && !PyDict_Check(kwargs))) return nullptr;
  try {
    c10::impl::DisablePythonDispatcher no_python_dispatcher;  // as_strided's C++ meta kernel
    if (op == View::kFactory) return factory_call(args, kwargs);
    PyObject* self = PyTuple_GET_ITEM(args, 0);
    if (!THPVariable_CheckExact(self)) return nullptr;
    const at::Tensor& t = THPVariable_Unpack(self);
    if (!t.defined() || !t.is_meta() || t.layout() != at::kStrided) return nullptr;
    if (op == View::kIndex || op == View::kNative) {
      PyObject* r = native_call(op, target, method, args, kwargs);
      if (!r) PyErr_Clear();
      return r;
    }
    return view_call(op, t, args, kwargs);
  } catch (const std::exception&) {  // py::error_already_set too: it took the Python error
    PyErr_Clear();
    return nullptr;  // the Python path answers, and raises the operator's own errors
  }
}

}  // namespace kiln::frontend
