// Shape propagation with symbolic sizes through the static C++ shape functions (fast_meta.cpp),
// by evaluating the operator at probe sizes and reading the symbols back from its result.
//
// With symbolic sizes the capture ran every operator through PyTorch's Python meta kernels
// (references and decompositions under the Python dispatcher): a few hundred microseconds of
// Python per operator, and the first `torch._check` among them imports
// torch.fx.experimental.symbolic_shapes and sympy (0.5 s here, 2.5 s on the GPU image) at a
// graph's first recompile with new sizes. Here each symbol of the operands gets a probe value:
// distinct, and far above every static size and integer argument of the call. The operands are
// replaced by plain meta tensors of those sizes (and symbolic integer arguments by their values),
// the static shape function computes the result, and each of its sizes is read back: a probe
// value of an operand's size or of an integer argument is that symbolic size, a value far below
// the probes is static, a sum of those is their sum (torch.cat), and anything else (a size
// computed from a symbol otherwise: a quotient, a product) makes the call take the Python path. Distinct probes mean two symbols never look equal, so an
// operator that needs sizes equal that are not provably so (broadcasting s0 with s1) fails at the
// probes and takes the Python path too, which guards what it needs. The result's strides are
// rebuilt from the probe result's dimension order (dense results only). The call is evaluated at
// two sets of probe values, and the result read back from the first must match the second.
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <c10/core/impl/PythonDispatcherTLS.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/csrc/utils/python_symnode.h>

#include <algorithm>
#include <numeric>
#include <optional>
#include <unordered_map>
#include <vector>

#include "frontend/objects/py_ref.h"
#include "frontend/objects/tensor_probe.h"
#include "python/capture_autograd.h"
#include "torch_bridge/sym_node.h"

namespace kiln::frontend {

namespace {

constexpr int kMaxDepth = 2;  // arguments, and the items of a list or tuple argument
// Probe values go far above every static size and int of the call; a call with a larger one
// (slicing's INT64_MAX end) takes the Python path.
constexpr int64_t kMaxStatic = int64_t{1} << 40;

int64_t magnitude(int64_t v) { return v == INT64_MIN ? INT64_MAX : (v < 0 ? -v : v); }

// What one call's arguments hold, and their stand-ins at the probe sizes.
struct Probe {
  std::vector<int> symbols;                                  // ids, each once
  int64_t max_static = 1;                                    // the largest static size or int seen
  std::vector<int64_t> values;                               // per symbol id: its probe value
  int64_t low = 0;                                           // every probe value is above this
  std::vector<std::pair<int64_t, c10::SymInt>> known;        // probe value -> the size it stands for
  std::unordered_map<c10::TensorImpl*, at::Tensor> stand_ins;  // operand -> stand-in
  std::vector<std::pair<at::Tensor, at::Tensor>> operands;   // (operand, stand-in)
  std::vector<at::Tensor> grad_operands;                     // operands that require grad
  bool symbolic = false;

  bool note_expr(const c10::SymInt& s) {
    sym::Expr e;
    if (!bridge::symint_expr(s, &e)) return false;
    if (e.is_constant()) {
      max_static = std::max(max_static, magnitude(e.constant_value()));
      return true;
    }
    symbolic = true;
    std::vector<int> ids;
    e.collect_symbols(ids);
    for (int id : ids)
      if (std::find(symbols.begin(), symbols.end(), id) == symbols.end()) symbols.push_back(id);
    return true;
  }

  // Pass 1: what the arguments hold. False where one is not something this path handles.
  bool collect(PyObject* o, int depth) {
    if (THPVariable_Check(o)) {
      if (!THPVariable_CheckExact(o)) return false;
      const at::Tensor& t = THPVariable_Unpack(o);
      if (!t.defined() || !t.is_meta() || t.layout() != at::kStrided) return false;
      for (const auto& s : t.sym_sizes())
        if (!note_expr(s)) return false;
      for (const auto& s : t.sym_strides())
        if (!note_expr(s)) return false;
      return note_expr(t.sym_storage_offset());
    }
    if (torch::is_symint(o)) return note_expr(py::handle(o).cast<c10::SymInt>());
    if (torch::is_symfloat(o) || torch::is_symbool(o)) return false;
    if (PyLong_Check(o) && !PyBool_Check(o)) {
      int overflow = 0;
      const long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
      if (overflow || (v == -1 && PyErr_Occurred())) { PyErr_Clear(); return false; }
      max_static = std::max<int64_t>(max_static, magnitude(v));
      return true;
    }
    if (PyTuple_Check(o) || PyList_Check(o)) {
      if (depth >= kMaxDepth) return false;
      const Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
      for (Py_ssize_t i = 0; i < n; ++i)
        if (!collect(PySequence_Fast_GET_ITEM(o, i), depth + 1)) return false;
    }
    return true;  // None, floats, bools, strings, dtypes, devices...
  }

  int64_t eval(const c10::SymInt& s) const {
    sym::Expr e;
    bridge::symint_expr(s, &e);  // collect() saw every one
    return e.eval(values.data());
  }

  // The probe values of round `round` (0 or 1): far above every static size, so a static result
  // size (a reduction's 1, a weight's dimension) stays below `low`, distinct per symbol, and
  // different in the two rounds, so that a size computed from a symbol in a way lift() does not
  // read (a quotient by a pooling stride) cannot pass for a static one in both.
  void assign(int round) {
    int max_id = 0;
    for (int id : symbols) max_id = std::max(max_id, id);
    values.assign(static_cast<size_t>(max_id) + 1, 0);
    low = std::max<int64_t>(1 << 14, 16 * (max_static + 1));
    for (size_t k = 0; k < symbols.size(); ++k)
      values[static_cast<size_t>(symbols[k])] = (16 + 3 * round) * low + 1 + (97 + 4 * round) * static_cast<int64_t>(k);
    stand_ins.clear();
    operands.clear();
    grad_operands.clear();
    known.clear();
  }

  // The static shape function's result at the current probe values (a new reference), or null.
  PyObject* evaluate(PyObject* target, const std::string& method, PyObject* args, PyObject* kwargs) {
    PyRef probe_args = PyRef::steal(substitute(args));
    PyRef probe_kwargs;
    if (kwargs) {
      probe_kwargs = PyRef::steal(PyDict_New());
      if (!probe_kwargs) throw py::error_already_set();
      Py_ssize_t pos = 0;
      PyObject *k, *v;
      while (PyDict_Next(kwargs, &pos, &k, &v)) {
        PyRef item = PyRef::steal(substitute(v));
        if (PyDict_SetItem(probe_kwargs.get(), k, item.get()) < 0) throw py::error_already_set();
      }
    }
    PyObject* result = probe_fast_meta(target, method, probe_args.get(), probe_kwargs.get());
    if (result && !THPVariable_CheckExact(result)) Py_CLEAR(result);
    return result;
  }

  // The operand (index into `operands`) a result is, or -1 (x.to(its own dtype) is x).
  int same_operand(const at::Tensor& r) const {
    for (size_t i = 0; i < operands.size(); ++i)
      if (r.is_same(operands[i].second)) return static_cast<int>(i);
    return -1;
  }

  // Whether `r`, computed at the current probe values, is what `lifted` says it is there.
  bool agrees(const at::Tensor& lifted, const at::Tensor& r) const {
    if (r.dim() != lifted.dim() || r.scalar_type() != lifted.scalar_type() || r.storage_offset() != 0) return false;
    for (int64_t d = 0; d < r.dim(); ++d) {
      if (eval(lifted.sym_size(d)) != r.size(d)) return false;
      if (r.size(d) != 1 && eval(lifted.sym_stride(d)) != r.stride(d)) return false;
    }
    return true;
  }

  bool know(const c10::SymInt& s) {
    if (!s.is_heap_allocated()) return true;
    const int64_t v = eval(s);
    if (v <= 1) return false;
    for (const auto& [kv, ks] : known) {
      if (kv != v) continue;
      sym::Expr a, b;
      bridge::symint_expr(ks, &a);
      bridge::symint_expr(s, &b);
      return a.same(b);  // the same size twice, or an ambiguity: the Python path
    }
    known.emplace_back(v, s);
    return true;
  }

  at::Tensor stand_in(const at::Tensor& t) {
    auto it = stand_ins.find(t.unsafeGetTensorImpl());
    if (it != stand_ins.end()) return it->second;
    std::vector<int64_t> sizes, strides;
    for (const auto& s : t.sym_sizes()) sizes.push_back(eval(s));
    for (const auto& s : t.sym_strides()) strides.push_back(eval(s));
    const int64_t offset = eval(t.sym_storage_offset());
    // The elements the stand-in spans, checked against overflow (probe sizes are large).
    int64_t span = offset + 1;
    for (size_t d = 0; d < sizes.size(); ++d) {
      if (sizes[d] == 0) { span = 0; break; }
      if (strides[d] < 0) throw std::runtime_error("negative stride");
      if (strides[d] > 0 && sizes[d] - 1 > (INT64_MAX / 16 - span) / strides[d]) throw std::runtime_error("probe sizes overflow");
      span += (sizes[d] - 1) * strides[d];
    }
    at::Tensor s;
    {
      c10::AutoGradMode off(false);
      auto options = t.options().requires_grad(false);
      s = offset == 0 ? at::empty_strided(sizes, strides, options)
                      : at::empty({span}, options).as_strided(sizes, strides, offset);
    }
    if (t.requires_grad()) {
      s.requires_grad_(true);  // a leaf: fast_meta gives the result autograd metadata from it
      grad_operands.push_back(t);
    }
    stand_ins.emplace(t.unsafeGetTensorImpl(), s);
    operands.emplace_back(t, s);
    return s;
  }

  // Pass 2: the arguments with their stand-ins and probe values (a new reference).
  PyObject* substitute(PyObject* o) {
    if (THPVariable_Check(o)) {
      const at::Tensor& t = THPVariable_Unpack(o);
      for (const auto& s : t.sym_sizes())
        if (!know(s)) throw std::runtime_error("ambiguous probe");
      return THPVariable_Wrap(stand_in(t));
    }
    if (torch::is_symint(o)) {
      c10::SymInt s = py::handle(o).cast<c10::SymInt>();
      if (!know(s)) throw std::runtime_error("ambiguous probe");
      return PyLong_FromLongLong(s.is_heap_allocated() ? eval(s) : s.as_int_unchecked());
    }
    if (PyTuple_Check(o) || PyList_Check(o)) {
      const Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
      PyRef out = PyRef::steal(PyList_Check(o) ? PyList_New(n) : PyTuple_New(n));  // freed if an item throws
      if (!out) throw py::error_already_set();
      for (Py_ssize_t i = 0; i < n; ++i) {
        PyObject* item = substitute(PySequence_Fast_GET_ITEM(o, i));
        if (PyList_Check(out.get())) PyList_SET_ITEM(out.get(), i, item);
        else PyTuple_SET_ITEM(out.get(), i, item);
      }
      return out.release();
    }
    return Py_NewRef(o);
  }

  // A size that is the sum of two operand sizes, one of them symbolic (torch.cat of a cache and
  // a step: s0 + 1). Probe values are far apart and far above static sizes, so no other sum of
  // them has the same value.
  std::optional<c10::SymInt> known_sum(int64_t v) const {
    for (size_t i = 0; i < known.size(); ++i) {
      const int64_t rest = v - known[i].first;
      if (rest >= 0 && rest < low) return known[i].second + c10::SymInt(rest);
      for (size_t j = i; j < known.size(); ++j)
        if (known[j].first == rest) return known[i].second + known[j].second;
    }
    return std::nullopt;
  }

  // The symbolic form of a probe result, or an undefined tensor where it cannot be read back.
  at::Tensor lift(const at::Tensor& r) const {
    const int64_t n = r.dim();
    std::vector<c10::SymInt> sizes;
    for (int64_t d = 0; d < n; ++d) {
      const int64_t v = r.size(d);
      auto it = std::find_if(known.begin(), known.end(), [&](const auto& k) { return k.first == v; });
      if (it != known.end()) sizes.push_back(it->second);
      else if (v < low) sizes.push_back(c10::SymInt(v));
      else if (auto sum = known_sum(v)) sizes.push_back(*sum);
      else return at::Tensor();  // computed from a symbol otherwise
    }
    // Dense results only: the dimensions ordered by stride, each stride the product of the
    // sizes inside it (size-1 dimensions' strides are whatever that order gives them).
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return r.stride(a) > r.stride(b); });
    std::vector<c10::SymInt> strides(static_cast<size_t>(n), c10::SymInt(1));
    c10::SymInt inner(1);
    int64_t inner_value = 1;
    for (int64_t i = n - 1; i >= 0; --i) {
      const int64_t d = order[static_cast<size_t>(i)];
      if (r.size(d) != 1 && r.stride(d) != inner_value) return at::Tensor();
      strides[static_cast<size_t>(d)] = inner;
      inner = inner * sizes[static_cast<size_t>(d)];
      inner_value *= r.size(d);
    }
    if (r.storage_offset() != 0) return at::Tensor();
    at::Tensor out;
    {
      at::AutoDispatchBelowADInplaceOrView below;
      c10::AutoGradMode off(false);
      out = at::empty_strided_symint(sizes, strides, r.options().requires_grad(false));
    }
    if (r.requires_grad() && !attach_capture_autograd(out, grad_operands, true)) return at::Tensor();
    return out;
  }
};

}  // namespace

PyObject* probe_symbolic_fast_meta(PyObject* target, const std::string& method, PyObject* args, PyObject* kwargs) {
  if (!PyTuple_Check(args) || (kwargs && !PyDict_Check(kwargs))) return nullptr;
  try {
    Probe p;
    if (!p.collect(args, 0)) return nullptr;
    if (kwargs) {
      Py_ssize_t pos = 0;
      PyObject *k, *v;
      while (PyDict_Next(kwargs, &pos, &k, &v))
        if (!p.collect(v, 1)) return nullptr;
    }
    // The static shape functions run ATen's C++ meta code: not PyTorch's Python kernels, which
    // the capture's Python dispatcher would route some of it to.
    c10::impl::DisablePythonDispatcher no_python_dispatcher;
    if (!p.symbolic) return probe_fast_meta(target, method, args, kwargs);
    if (p.symbols.size() > 6 || p.max_static > kMaxStatic) return nullptr;
    p.assign(0);
    PyRef first = PyRef::steal(p.evaluate(target, method, args, kwargs));
    if (!first) return nullptr;
    const at::Tensor& r = THPVariable_Unpack(first.get());
    const int same = p.same_operand(r);
    const at::Tensor original = same >= 0 ? p.operands[static_cast<size_t>(same)].first : at::Tensor();
    at::Tensor lifted = same >= 0 ? at::Tensor() : p.lift(r);
    if (same < 0 && !lifted.defined()) return nullptr;
    // The second round: the same call at other probe values must give what the lifted result
    // says it gives there.
    p.assign(1);
    PyRef second = PyRef::steal(p.evaluate(target, method, args, kwargs));
    if (!second) return nullptr;
    const at::Tensor& r2 = THPVariable_Unpack(second.get());
    if (same >= 0) return p.same_operand(r2) == same ? THPVariable_Wrap(original) : nullptr;
    if (!p.agrees(lifted, r2)) return nullptr;
    return THPVariable_Wrap(std::move(lifted));
  } catch (const std::exception&) {  // py::error_already_set too: it took the Python error
    PyErr_Clear();
    return nullptr;  // the Python path answers, and raises the operator's own errors
  }
}

}  // namespace kiln::frontend
