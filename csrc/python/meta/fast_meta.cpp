// Shape propagation of common elementwise operators in C++ (see frontend/objects/tensor_probe.h,
// probe_fast_meta).
//
// PyTorch registers its Python reference implementations (torch._refs, torch._decomp) as the
// Meta kernels of most operators, replacing ATen's C++ meta functions for the Meta dispatch key.
// Running `x * 2` on a meta tensor therefore runs Python code that imports sympy and
// torch.fx.experimental.symbolic_shapes on first use: 0.4 s on a machine with compiled bytecode,
// 3 s where the Python files must be compiled on import (the GPU image), and that was nearly all
// of kiln's first call on CUDA. For the operators below, with plain meta tensors and Python
// numbers, the result comes from ATen's own structured meta functions (at::meta::*, the
// TensorIterator rules the CPU and CUDA kernels themselves follow); anything else (symbolic sizes,
// autograd, autocast, dispatch modes, other arguments) takes the Python path as before.
//
// The composite operators real models call (softmax, layer_norm, linear, matmul, reductions,
// conv2d, cat...) are answered by fast_meta_composites.cpp, under the same conditions.
#include <ATen/ATen.h>
#include <ATen/MetaFunctions.h>
#include <ATen/autocast_mode.h>
#include <c10/core/GradMode.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/python_variable.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "frontend/objects/tensor_probe.h"
#include "python/capture_autograd.h"
#include "python/meta/fast_meta_common.h"
#include "torch_bridge/autograd_node.h"

namespace kiln::frontend {

namespace {

enum class Op { kAdd, kSub, kMul, kDiv, kEq, kNe, kLt, kLe, kGt, kGe, kAnd, kOr, kXor, kNeg, kRelu, kExp, kSigmoid, kTanh, kRsqrt, kSqrt, kLog, kSin, kCos, kErf, kGelu, kSilu, kMaximum, kMinimum };
struct OpRef {
  Op op;
  bool reflected = false;    // x.__rsub__(y) is y - x: the operands swap (x.__radd__(y) is add(x, y))
  bool number_left = false;  // operator.sub(2, x): Python numbers may come first (torch.sub(2, x) raises)
};

// Methods of torch.Tensor by name.
const std::unordered_map<std::string, OpRef>& methods() {
  static const std::unordered_map<std::string, OpRef> m = {
      {"add", {Op::kAdd}}, {"__add__", {Op::kAdd}}, {"__radd__", {Op::kAdd}}, {"sub", {Op::kSub}}, {"__sub__", {Op::kSub}},
      {"__rsub__", {Op::kSub, true, true}}, {"mul", {Op::kMul}}, {"__mul__", {Op::kMul}}, {"__rmul__", {Op::kMul}},
      {"div", {Op::kDiv}}, {"true_divide", {Op::kDiv}}, {"__truediv__", {Op::kDiv}}, {"eq", {Op::kEq}}, {"__eq__", {Op::kEq}},
      {"ne", {Op::kNe}}, {"__ne__", {Op::kNe}}, {"lt", {Op::kLt}}, {"__lt__", {Op::kLt}}, {"le", {Op::kLe}}, {"__le__", {Op::kLe}},
      {"gt", {Op::kGt}}, {"__gt__", {Op::kGt}}, {"ge", {Op::kGe}}, {"__ge__", {Op::kGe}}, {"neg", {Op::kNeg}}, {"__neg__", {Op::kNeg}},
      {"relu", {Op::kRelu}}, {"exp", {Op::kExp}}, {"sigmoid", {Op::kSigmoid}}, {"tanh", {Op::kTanh}}, {"rsqrt", {Op::kRsqrt}},
      {"sqrt", {Op::kSqrt}}, {"log", {Op::kLog}}, {"sin", {Op::kSin}}, {"cos", {Op::kCos}}, {"erf", {Op::kErf}},
      {"maximum", {Op::kMaximum}}, {"minimum", {Op::kMinimum}}, {"bitwise_and", {Op::kAnd}}, {"__and__", {Op::kAnd}},
      {"__rand__", {Op::kAnd}}, {"bitwise_or", {Op::kOr}}, {"__or__", {Op::kOr}}, {"__ror__", {Op::kOr}},
      {"bitwise_xor", {Op::kXor}}, {"__xor__", {Op::kXor}}, {"__rxor__", {Op::kXor}}};
  return m;
}

// Callables (operator.*, torch.*, torch._C._nn.*) by identity; built on first use, under the GIL.
const std::unordered_map<PyObject*, OpRef>& functions() {
  static std::unordered_map<PyObject*, OpRef>* m = [] {
    auto* table = new std::unordered_map<PyObject*, OpRef>();  // never freed: holds references to module attributes
    auto add = [&](const char* module, const char* name, OpRef r) {
      PyObject* mod = PyImport_ImportModule(module);
      PyObject* f = mod ? PyObject_GetAttrString(mod, name) : nullptr;
      Py_XDECREF(mod);
      if (f) (*table)[f] = r;  // the reference is kept
      else PyErr_Clear();
    };
    for (auto [name, op] : std::initializer_list<std::pair<const char*, Op>>{
             {"add", Op::kAdd}, {"sub", Op::kSub}, {"mul", Op::kMul}, {"truediv", Op::kDiv}, {"eq", Op::kEq}, {"ne", Op::kNe},
             {"lt", Op::kLt}, {"le", Op::kLe}, {"gt", Op::kGt}, {"ge", Op::kGe}, {"neg", Op::kNeg},
             {"and_", Op::kAnd}, {"or_", Op::kOr}, {"xor", Op::kXor}})
      add("operator", name, {op, false, true});
    for (auto [name, op] : std::initializer_list<std::pair<const char*, Op>>{
             {"add", Op::kAdd}, {"sub", Op::kSub}, {"mul", Op::kMul}, {"div", Op::kDiv}, {"true_divide", Op::kDiv}, {"eq", Op::kEq},
             {"ne", Op::kNe}, {"lt", Op::kLt}, {"le", Op::kLe}, {"gt", Op::kGt}, {"ge", Op::kGe}, {"neg", Op::kNeg},
             {"relu", Op::kRelu}, {"exp", Op::kExp}, {"sigmoid", Op::kSigmoid}, {"tanh", Op::kTanh}, {"rsqrt", Op::kRsqrt},
             {"sqrt", Op::kSqrt}, {"log", Op::kLog}, {"sin", Op::kSin}, {"cos", Op::kCos}, {"erf", Op::kErf},
             {"maximum", Op::kMaximum}, {"minimum", Op::kMinimum}, {"bitwise_and", Op::kAnd}, {"bitwise_or", Op::kOr},
             {"bitwise_xor", Op::kXor}})
      add("torch", name, {op});
    add("torch._C._nn", "gelu", {Op::kGelu});
    add("torch._C._nn", "silu", {Op::kSilu});
    return table;
  }();
  return *m;
}

}  // namespace

namespace fast_meta {

std::vector<at::Tensor>& grad_operands() {
  thread_local std::vector<at::Tensor> operands;
  return operands;
}

bool meta_operand(PyObject* o, at::Tensor* t) {
  if (!o || !THPVariable_CheckExact(o)) return false;
  const at::Tensor& x = THPVariable_Unpack(o);
  if (!x.defined() || !x.is_meta() || x.layout() != at::kStrided || probe_is_symbolic_tensor(o)) return false;
  if (x.requires_grad()) grad_operands().push_back(x);
  *t = x;
  return true;
}

bool attach_autograd(at::Tensor& result, bool grad) {
  std::vector<at::Tensor> operands = std::move(grad_operands());
  grad_operands().clear();
  return attach_capture_autograd(result, operands, grad);
}

bool number(PyObject* o, at::Scalar* s) {
  if (PyBool_Check(o)) {
    *s = at::Scalar(o == Py_True);
    return true;
  }
  if (PyLong_CheckExact(o)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) {
      PyErr_Clear();
      return false;
    }
    *s = at::Scalar(static_cast<int64_t>(v));
    return true;
  }
  if (PyFloat_CheckExact(o)) {
    *s = at::Scalar(PyFloat_AS_DOUBLE(o));
    return true;
  }
  return false;
}

}  // namespace fast_meta

namespace {

// The autograd node of a capture-time meta result whose operands require grad: the capture reads
// only what it says (requires_grad, not a leaf) and never differentiates these tensors, so the
// node is never run. (Training captures used to take PyTorch's Python meta kernels here, whose
// first use imports sympy: 2 s of a CUDA training step's first call on an H100 machine.)
struct CaptureOnlyBackward : torch::autograd::Node {
  torch::autograd::variable_list apply(torch::autograd::variable_list&&) override {
    throw std::runtime_error("kiln: a capture-time meta tensor is not differentiable");
  }
  std::string name() const override { return "kiln::CaptureOnlyBackward"; }
};

}  // namespace

// (python/capture_autograd.h)
bool attach_capture_autograd(at::Tensor& result, const std::vector<at::Tensor>& operands, bool grad) {
  if (!grad || operands.empty() || !result.defined() || !(at::isFloatingType(result.scalar_type()) || at::isComplexType(result.scalar_type())))
    return true;
  for (const at::Tensor& o : operands)
    if (result.is_same(o)) return true;  // x.to(its own dtype) is x, as in eager
  if (result.is_view() || result.requires_grad()) return false;
  auto fn = bridge::make_node<CaptureOnlyBackward>();
  fn->set_next_edges(torch::autograd::collect_next_edges(operands));
  torch::autograd::create_gradient_edge(result, std::move(fn));
  return true;
}

namespace {
using namespace fast_meta;


at::Tensor wrapped(const at::Scalar& s) {
  at::Tensor t = at::scalar_to_tensor(s);
  t.unsafeGetTensorImpl()->set_wrapped_number(true);
  return t;
}

at::Tensor binary(Op op, const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {
  switch (op) {
    case Op::kAdd: return at::meta::add(a, b, alpha);
    case Op::kSub: return at::meta::sub(a, b, alpha);
    case Op::kMul: return at::meta::mul(a, b);
    case Op::kDiv: return at::meta::div(a, b);
    case Op::kEq: return at::meta::eq(a, b);
    case Op::kNe: return at::meta::ne(a, b);
    case Op::kLt: return at::meta::lt(a, b);
    case Op::kLe: return at::meta::le(a, b);
    case Op::kGt: return at::meta::gt(a, b);
    case Op::kGe: return at::meta::ge(a, b);
    case Op::kMaximum: return at::meta::maximum(a, b);
    case Op::kMinimum: return at::meta::minimum(a, b);
    case Op::kAnd: return at::meta::bitwise_and(a, b);
    case Op::kOr: return at::meta::bitwise_or(a, b);
    case Op::kXor: return at::meta::bitwise_xor(a, b);
    default: return {};
  }
}

at::Tensor unary(Op op, const at::Tensor& a, const std::string& approximate) {
  switch (op) {
    case Op::kNeg: return at::meta::neg(a);
    case Op::kRelu: return at::meta::clamp_min(a, 0);  // relu is clamp_min(x, 0) in ATen
    case Op::kExp: return at::meta::exp(a);
    case Op::kSigmoid: return at::meta::sigmoid(a);
    case Op::kTanh: return at::meta::tanh(a);
    case Op::kRsqrt: return at::meta::rsqrt(a);
    case Op::kSqrt: return at::meta::sqrt(a);
    case Op::kLog: return at::meta::log(a);
    case Op::kSin: return at::meta::sin(a);
    case Op::kCos: return at::meta::cos(a);
    case Op::kErf: return at::meta::erf(a);
    case Op::kGelu: return at::meta::gelu(a, approximate);
    case Op::kSilu: return at::meta::silu(a);
    default: return {};
  }
}

bool is_binary(Op op) { return op <= Op::kXor || op == Op::kMaximum || op == Op::kMinimum; }


}  // namespace

PyObject* probe_fast_meta(PyObject* target, const std::string& method, PyObject* args, PyObject* kwargs) {
  const OpRef* ref = nullptr;
  if (method.empty()) {
    auto it = functions().find(target);
    if (it != functions().end()) ref = &it->second;
  } else {
    auto it = methods().find(method);
    if (it != methods().end()) ref = &it->second;
  }
  if (!PyTuple_Check(args)) return nullptr;
  // Anything that could change what the operator does on these tensors keeps the Python path.
  if (at::autocast::is_autocast_enabled(at::kCPU) || at::autocast::is_autocast_enabled(at::kCUDA) ||
      c10::impl::TorchDispatchModeTLS::stack_len() > 0)
    return nullptr;
  if (!ref) return fast_composite(target, method, args, kwargs);
  const Op op = ref->op;
  const Py_ssize_t n = PyTuple_GET_SIZE(args);
  at::Scalar alpha = 1;
  std::string approximate = "none";
  if (kwargs && PyDict_GET_SIZE(kwargs) > 0) {
    if (PyDict_GET_SIZE(kwargs) != 1) return nullptr;
    PyObject* a = PyDict_GetItemString(kwargs, "alpha");
    PyObject* g = PyDict_GetItemString(kwargs, "approximate");
    if (a && (op == Op::kAdd || op == Op::kSub) && !ref->reflected) {
      if (!number(a, &alpha)) return nullptr;
    } else if (g && op == Op::kGelu && PyUnicode_Check(g)) {
      const char* s = PyUnicode_AsUTF8(g);
      if (!s) { PyErr_Clear(); return nullptr; }
      approximate = s;
      if (approximate != "none" && approximate != "tanh") return nullptr;
    } else {
      return nullptr;
    }
  }
  const bool grad = c10::GradMode::is_enabled();
  grad_operands().clear();
  std::optional<c10::AutoGradMode> grad_off(std::in_place, false);
  at::Tensor result;
  try {
    if (is_binary(op)) {
      if (n != 2) return nullptr;
      at::Tensor a, b;
      at::Scalar s;
      PyObject* x = PyTuple_GET_ITEM(args, 0);
      PyObject* y = PyTuple_GET_ITEM(args, 1);
      if (ref->reflected) std::swap(x, y);  // self.__rsub__(other) is other - self
      const bool tensors_only = op == Op::kMaximum || op == Op::kMinimum;
      if (meta_operand(x, &a)) {
        if (meta_operand(y, &b)) result = binary(op, a, b, alpha);
        else if (!tensors_only && number(y, &s)) result = binary(op, a, wrapped(s), alpha);
        else return nullptr;
      } else if (ref->number_left && !tensors_only && meta_operand(y, &b) && number(x, &s)) {
        // A number on the left: operator.mul(2, x) runs x.__rmul__(2), i.e. mul(x, 2); a
        // comparison is reflected (2 < x is x > 2); a subtraction is sub(wrapped 2, x) as rsub
        // computes it; a division, x.__rtruediv__, is computed another way: the Python path.
        switch (op) {
          case Op::kAdd: case Op::kMul: case Op::kEq: case Op::kNe: case Op::kAnd: case Op::kOr: case Op::kXor:
            result = binary(op, b, wrapped(s), alpha);
            break;
          case Op::kLt: result = binary(Op::kGt, b, wrapped(s), alpha); break;
          case Op::kLe: result = binary(Op::kGe, b, wrapped(s), alpha); break;
          case Op::kGt: result = binary(Op::kLt, b, wrapped(s), alpha); break;
          case Op::kGe: result = binary(Op::kLe, b, wrapped(s), alpha); break;
          case Op::kSub: result = binary(Op::kSub, wrapped(s), b, alpha); break;
          default: return nullptr;
        }
      } else {
        return nullptr;
      }
    } else {
      if (n != 1) return nullptr;
      at::Tensor a;
      if (!meta_operand(PyTuple_GET_ITEM(args, 0), &a)) return nullptr;
      if (op == Op::kRelu && (a.scalar_type() == at::kBool || (!at::isSignedType(a.scalar_type()) && !at::isFloatingType(a.scalar_type()))))
        return nullptr;
      result = unary(op, a, approximate);
    }
  } catch (const std::exception&) {
    return nullptr;  // the Python path raises the operator's own error
  }
  if (!result.defined()) return nullptr;
  // ATen's bitwise meta functions leave the dtype check to the kernels; PyTorch's meta kernels
  // refuse floating operands.
  if ((op == Op::kAnd || op == Op::kOr || op == Op::kXor) && !at::isIntegralType(result.scalar_type(), /*includeBool=*/true))
    return nullptr;
  grad_off.reset();
  if (!attach_autograd(result, grad)) return nullptr;
  return THPVariable_Wrap(std::move(result));
}

}  // namespace kiln::frontend
