// Shape propagation of composite operators in C++ (see fast_meta_common.h, fast_composite):
// F.softmax / layer_norm / embedding / linear / scaled_dot_product_attention, matmul and its
// forms, reductions, tril/triu, masked_fill, casts, arange, cat, and the convolution network's
// conv2d, batch_norm, max_pool2d, adaptive_avg_pool2d and activations. Each result comes from
// ATen's structured meta function where it has one (_softmax, mm, addmm, bmm, sum, amax...),
// otherwise from the result rule the operator's kernels follow (a new contiguous tensor of a
// computed shape and dtype), for the argument combinations where that is exactly what PyTorch's
// meta kernels give (tests/python/test_fast_meta.py compares them); other combinations, and
// every error, take the Python path.
#include <ATen/ATen.h>
#include <ATen/MetaFunctions.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/autograd/python_variable.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "frontend/objects/tensor_probe.h"
#include "python/call_binding.h"
#include "python/meta/fast_meta_common.h"

namespace kiln::frontend::fast_meta {

namespace {

enum class Kind { kSoftmax, kLogSoftmax, kLayerNorm, kEmbedding, kLinear, kMatmul, kMm, kBmm, kAddmm, kBaddbmm, kSum, kMean,
                  kArange, kAmax, kAmin, kTril, kTriu, kMaskedFill, kBitwiseNot, kPow, kSquare, kTo, kCast, kTypeAs, kSdpa,
                  kConv2d, kRelu, kSilu, kBatchNorm, kMaxPool2d, kAdaptiveAvgPool2d, kCat };

// A Python signature: parameter names in order, how many must be given, how many may be given
// by position, and how many leading ones may not be given by keyword (self of a method, the
// operands of operator.*).
struct Sig {
  Kind kind;
  std::vector<const char*> names;
  int required = 1;
  int positional = 99;
  int positional_only = 0;
  at::ScalarType cast = at::kFloat;  // kCast: the dtype of x.float(), x.half()...
};

// Arguments bound to a signature's names; nullptr where not given.
struct Bound {
  const Sig* sig = nullptr;
  PyObject* v[10] = {};
  PyObject* get(const char* name) const {
    for (size_t i = 0; i < sig->names.size(); ++i)
      if (std::strcmp(sig->names[i], name) == 0) return v[i];
    return nullptr;
  }
};

bool bind(const Sig& sig, PyObject* args, PyObject* kwargs, Bound* b) {
  b->sig = &sig;
  return bind_call(sig.names, sig.required, sig.positional, sig.positional_only, args, kwargs, b->v);
}

bool is_float(at::ScalarType t) { return t == at::kFloat || t == at::kDouble || t == at::kHalf || t == at::kBFloat16; }

bool as_int(PyObject* o, int64_t* v) {
  if (!o || !PyLong_CheckExact(o)) return false;  // not bool
  int overflow = 0;
  long long x = PyLong_AsLongLongAndOverflow(o, &overflow);
  if (overflow || (x == -1 && PyErr_Occurred())) { PyErr_Clear(); return false; }
  *v = x;
  return true;
}
bool as_bool(PyObject* o, bool* v) {
  if (!o || !PyBool_Check(o)) return false;
  *v = o == Py_True;
  return true;
}
bool as_double(PyObject* o, double* v) {
  if (o && PyFloat_CheckExact(o)) { *v = PyFloat_AS_DOUBLE(o); return true; }
  int64_t i;
  if (as_int(o, &i)) { *v = static_cast<double>(i); return true; }
  return false;
}
// A tuple, list or torch.Size of ints; a single int too where `single` (PyTorch's int[1]).
bool as_ints(PyObject* o, std::vector<int64_t>* v, bool single) {
  v->clear();
  int64_t x;
  if (single && as_int(o, &x)) { v->push_back(x); return true; }
  if (!o || !(PyTuple_Check(o) || PyList_Check(o))) return false;
  for (Py_ssize_t i = 0, n = PySequence_Fast_GET_SIZE(o); i < n; ++i) {
    if (!as_int(PySequence_Fast_GET_ITEM(o, i), &x)) return false;
    v->push_back(x);
  }
  return true;
}
bool as_dtype(PyObject* o, at::ScalarType* t) {
  if (!o || !THPDtype_Check(o)) return false;
  *t = reinterpret_cast<THPDtype*>(o)->scalar_type;
  return true;
}
// An absent / None tensor (left undefined) or a meta operand.
bool opt_tensor(PyObject* o, at::Tensor* t) { return absent(o) || meta_operand(o, t); }
// An absent argument, or one of the given kind.
bool opt_bool(PyObject* o) { bool b; return !o || as_bool(o, &b); }
bool opt_double(PyObject* o) { double d; return !o || as_double(o, &d); }

std::vector<int64_t> sizes_of(const at::Tensor& t) { return t.sizes().vec(); }

// softmax(x, dim, dtype): _softmax of x converted to dtype; PyTorch's own rule (a new contiguous tensor).
at::Tensor softmax(const Bound& b, bool log) {
  at::Tensor x;
  int64_t dim;
  if (!meta_operand(b.get("input"), &x) || !as_int(b.get("dim"), &dim)) return {};  // no dim: F.softmax warns
  if (int64_t level; b.get("_stacklevel") && !as_int(b.get("_stacklevel"), &level)) return {};
  at::Tensor in = x;
  if (PyObject* d = b.get("dtype"); !absent(d)) {
    at::ScalarType t;
    if (!as_dtype(d, &t)) return {};
    if (t != x.scalar_type()) in = at::empty(x.sizes(), x.options().dtype(t));
  }
  if (!is_float(in.scalar_type())) return {};
  return log ? at::meta::_log_softmax(in, dim, false) : at::meta::_softmax(in, dim, false);
}

at::Tensor layer_norm(const Bound& b) {
  at::Tensor x, w, bias;
  std::vector<int64_t> shape;
  if (!meta_operand(b.get("input"), &x) || !as_ints(b.get("normalized_shape"), &shape, false) || !opt_tensor(b.get("weight"), &w) ||
      !opt_tensor(b.get("bias"), &bias) || !opt_double(b.get("eps")) || !opt_bool(b.get("cudnn_enable")))
    return {};
  const auto n = static_cast<int64_t>(shape.size());
  if (!is_float(x.scalar_type()) || n == 0 || n > x.dim()) return {};
  for (int64_t i = 0; i < n; ++i)
    if (x.size(x.dim() - n + i) != shape[i]) return {};
  for (const at::Tensor* p : {&w, &bias})
    if (p->defined() && (p->sizes().vec() != shape || p->scalar_type() != x.scalar_type())) return {};
  return at::empty(x.sizes(), x.options());
}

// F.embedding(input, weight, padding_idx...) and torch.embedding(weight, indices, padding_idx...).
at::Tensor embedding(const Bound& b) {
  at::Tensor idx, w;
  PyObject* indices = b.get("indices");
  if (!meta_operand(indices ? indices : b.get("input"), &idx) || !meta_operand(b.get("weight"), &w)) return {};
  if (w.dim() != 2 || !is_float(w.scalar_type()) || (idx.scalar_type() != at::kLong && idx.scalar_type() != at::kInt)) return {};
  if (PyObject* p = b.get("padding_idx"); !absent(p)) {
    int64_t i;
    if (!as_int(p, &i) || i >= w.size(0) || i < -w.size(0)) return {};  // F.embedding asserts
  }
  if (!absent(b.get("max_norm")) || !opt_double(b.get("norm_type")) || !opt_bool(b.get("scale_grad_by_freq")) || !opt_bool(b.get("sparse")))
    return {};
  auto sizes = sizes_of(idx);
  sizes.push_back(w.size(1));
  return at::empty(sizes, w.options());
}

// x @ w.t() + bias: a new contiguous tensor (addmm, or mm/bmm of the folded input, then a view).
at::Tensor linear(const Bound& b) {
  at::Tensor x, w, bias;
  if (!meta_operand(b.get("input"), &x) || !meta_operand(b.get("weight"), &w) || !opt_tensor(b.get("bias"), &bias)) return {};
  if (x.dim() < 1 || w.dim() != 2 || x.size(-1) != w.size(1) || !is_float(x.scalar_type()) || w.scalar_type() != x.scalar_type()) return {};
  if (bias.defined() && (bias.dim() != 1 || bias.size(0) != w.size(0) || bias.scalar_type() != x.scalar_type())) return {};
  auto sizes = sizes_of(x);
  sizes.back() = w.size(0);
  return at::empty(sizes, x.options());
}

// matmul's result: contiguous in every case where the larger operand is the left one or both are
// batches (2-D @ batch folds the batch into the right operand and returns a transposed view: left
// to the Python path).
at::Tensor matmul_result(const at::Tensor& a, const at::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || !is_float(a.scalar_type())) return {};
  const int64_t da = a.dim(), db = b.dim();
  if (da == 0 || db == 0 || (da <= 2 && db >= 3)) return {};
  std::vector<int64_t> out;
  if (da == 1 && db == 1) {
    if (a.size(0) != b.size(0)) return {};
  } else if (db == 1) {
    if (a.size(-1) != b.size(0)) return {};
    out = sizes_of(a);
    out.pop_back();
  } else if (da == 1) {  // db == 2
    if (a.size(0) != b.size(0)) return {};
    out = {b.size(1)};
  } else if (db == 2) {
    if (a.size(-1) != b.size(0)) return {};
    out = sizes_of(a);
    out.back() = b.size(1);
  } else {
    if (a.size(-1) != b.size(-2)) return {};
    out = at::infer_size(a.sizes().slice(0, da - 2), b.sizes().slice(0, db - 2));  // throws if they do not broadcast
    out.push_back(a.size(-2));
    out.push_back(b.size(-1));
  }
  return at::empty(out, a.options());
}

bool same_float(std::initializer_list<const at::Tensor*> ts) {
  for (const at::Tensor* t : ts)
    if (!is_float(t->scalar_type()) || t->scalar_type() != (*ts.begin())->scalar_type()) return false;
  return true;
}

at::Tensor reduction(Kind kind, const Bound& b) {
  at::Tensor x;
  if (!meta_operand(b.get("input"), &x)) return {};
  std::optional<std::vector<int64_t>> dims;
  if (PyObject* d = b.get("dim"); !absent(d)) {
    std::vector<int64_t> v;
    if (!as_ints(d, &v, true)) return {};
    dims = std::move(v);
  }
  bool keepdim = false;
  if (PyObject* k = b.get("keepdim"); k && !as_bool(k, &keepdim)) return {};
  std::optional<at::ScalarType> dtype;
  if (PyObject* d = b.get("dtype"); !absent(d)) {
    at::ScalarType t;
    if (!as_dtype(d, &t)) return {};
    dtype = t;
  }
  at::OptionalIntArrayRef dim_ref = dims ? at::OptionalIntArrayRef(*dims) : at::OptionalIntArrayRef();
  switch (kind) {
    case Kind::kSum: return at::meta::sum(x, dim_ref, keepdim, dtype);
    case Kind::kMean: {
      if (!is_float(dtype.value_or(x.scalar_type()))) return {};
      return at::meta::mean(x, dim_ref, keepdim, dtype);
    }
    case Kind::kAmax: case Kind::kAmin: {
      if (dtype) return {};
      std::vector<int64_t> all;
      const std::vector<int64_t>& d = dims ? *dims : all;
      return kind == Kind::kAmax ? at::meta::amax(x, d, keepdim) : at::meta::amin(x, d, keepdim);
    }
    default: return {};
  }
}

at::Tensor masked_fill(const Bound& b) {
  at::Tensor x, mask;
  at::Scalar value;
  if (!meta_operand(b.get("input"), &x) || !meta_operand(b.get("mask"), &mask) || !number(b.get("value"), &value)) return {};
  if (mask.scalar_type() != at::kBool || !is_float(x.scalar_type()) || mask.dim() > x.dim()) return {};
  for (int64_t i = 1; i <= mask.dim(); ++i)
    if (mask.size(-i) != 1 && mask.size(-i) != x.size(-i)) return {};
  return at::empty(x.sizes(), x.options());
}

at::Tensor cast(const at::Tensor& x, at::ScalarType t) {
  if (t == x.scalar_type()) return x;  // x.to(x.dtype) is x itself
  if (!x.is_non_overlapping_and_dense()) return {};
  return at::empty_strided(x.sizes(), x.strides(), x.options().dtype(t));  // preserve_format
}

at::Tensor sdpa(const Bound& b) {
  at::Tensor q, k, v, mask;
  if (!meta_operand(b.get("query"), &q) || !meta_operand(b.get("key"), &k) || !meta_operand(b.get("value"), &v) ||
      !opt_tensor(b.get("attn_mask"), &mask))
    return {};
  double p = 0;
  bool causal = false, gqa = false;
  if (PyObject* o = b.get("dropout_p"); o && (!as_double(o, &p) || p < 0 || p >= 1)) return {};
  if (PyObject* o = b.get("is_causal"); o && !as_bool(o, &causal)) return {};
  if (PyObject* o = b.get("enable_gqa"); o && !as_bool(o, &gqa)) return {};
  if (PyObject* o = b.get("scale"); !absent(o) && !as_double(o, &p)) return {};
  if (!same_float({&q, &k, &v}) || q.dim() < 3 || k.dim() != q.dim() || v.dim() != q.dim()) return {};
  const int64_t n = q.dim();
  // enable_gqa: the heads (dimension -3) of key and value may be fewer, a divisor of the query's
  // (grouped-query attention: transformers' Llama passes it when there is no mask).
  for (int64_t i = 0; i < n - 2; ++i) {
    if (gqa && i == n - 3) {
      if (k.size(i) != v.size(i) || k.size(i) == 0 || q.size(i) % k.size(i) != 0) return {};
    } else if (k.size(i) != q.size(i) || v.size(i) != q.size(i)) {
      return {};
    }
  }
  if (k.size(-1) != q.size(-1) || v.size(-2) != k.size(-2)) return {};
  if (mask.defined()) {
    if (causal || (mask.scalar_type() != at::kBool && mask.scalar_type() != q.scalar_type()) || mask.dim() > n) return {};
    auto target = sizes_of(q);
    target.back() = k.size(-2);
    for (int64_t i = 1; i <= mask.dim(); ++i)
      if (mask.size(-i) != 1 && mask.size(-i) != target[n - i]) return {};
  }
  auto sizes = sizes_of(q);
  sizes.back() = v.size(-1);
  return at::empty(sizes, q.options());
}

// torch.arange(end), (start, end[, step]) with Python ints, on the meta device (the frontend passes
// device=meta to factories): int64 unless dtype says otherwise.
at::Tensor arange(const Bound& b) {
  PyObject* d = b.get("device");
  if (!d || !THPDevice_Check(d) || reinterpret_cast<THPDevice*>(d)->device.type() != at::kMeta) return {};
  if (PyObject* l = b.get("layout"); !absent(l)) return {};
  for (const char* flag : {"requires_grad", "pin_memory"}) {
    bool v = false;
    if (PyObject* o = b.get(flag); o && (!as_bool(o, &v) || v)) return {};
  }
  int64_t start = 0, end = 0, step = 1;
  if (!as_int(b.get("start"), &start)) return {};
  if (PyObject* e = b.get("end"); e && !as_int(e, &end)) return {};
  if (PyObject* s = b.get("step"); s && !as_int(s, &step)) return {};
  if (!b.get("end")) std::swap(start, end);  // arange(end)
  constexpr int64_t kBig = int64_t{1} << 53;
  if (step == 0 || (step > 0 && end < start) || (step < 0 && end > start) || std::max(start, end) > kBig || std::min(start, end) < -kBig ||
      step > kBig || step < -kBig)
    return {};  // arange raises on an inconsistent step sign
  at::ScalarType dtype = at::kLong;
  if (PyObject* t = b.get("dtype"); !absent(t) && !as_dtype(t, &dtype)) return {};
  if (dtype != at::kLong && dtype != at::kInt && !is_float(dtype)) return {};
  const int64_t n = step > 0 ? (end - start + step - 1) / step : (start - end - step - 1) / -step;
  return at::empty({std::max<int64_t>(n, 0)}, at::TensorOptions().dtype(dtype).device(at::kMeta));
}

// ---- convolution networks (conv2d, batch_norm, max_pool2d, adaptive_avg_pool2d, F.relu) -------
// PyTorch's meta kernels for these check their arguments with torch._check, whose first use
// imports torch.fx.experimental.symbolic_shapes and sympy (a ResNet's first capture: 0.3 s with
// compiled bytecode, 2.9 s without, as on the GPU image). The fast path takes NCHW-contiguous
// operands (every PyTorch version gives a contiguous result there) and the arguments eager
// accepts; anything else takes the Python path, which raises the operator's own errors.

// int[2] as PyTorch parses it: one int, or a sequence of one or two.
bool as_pair(PyObject* o, int64_t out[2]) {
  std::vector<int64_t> v;
  if (!as_ints(o, &v, true) || v.empty() || v.size() > 2) return false;
  out[0] = v[0];
  out[1] = v.size() == 2 ? v[1] : v[0];
  return true;
}

bool nchw(const at::Tensor& t) { return t.dim() == 4 && t.is_contiguous() && is_float(t.scalar_type()); }

at::Tensor conv2d(const Bound& b) {
  at::Tensor x, w, bias;
  if (!meta_operand(b.get("input"), &x) || !meta_operand(b.get("weight"), &w) || !opt_tensor(b.get("bias"), &bias)) return {};
  int64_t stride[2] = {1, 1}, pad[2] = {0, 0}, dil[2] = {1, 1}, groups = 1;
  if (PyObject* o = b.get("stride"); o && !as_pair(o, stride)) return {};
  if (PyObject* o = b.get("padding"); o && !as_pair(o, pad)) return {};  // "same" / "valid": the Python path
  if (PyObject* o = b.get("dilation"); o && !as_pair(o, dil)) return {};
  if (PyObject* o = b.get("groups"); o && !as_int(o, &groups)) return {};
  if (!nchw(x) || !nchw(w) || w.scalar_type() != x.scalar_type() || groups < 1) return {};
  const int64_t cout = w.size(0);
  if (cout == 0 || cout % groups != 0 || x.size(1) != w.size(1) * groups || x.size(0) == 0) return {};
  if (bias.defined() && (bias.dim() != 1 || bias.size(0) != cout || bias.scalar_type() != x.scalar_type())) return {};
  std::vector<int64_t> sizes = {x.size(0), cout, 0, 0};
  for (int i = 0; i < 2; ++i) {
    if (stride[i] < 1 || pad[i] < 0 || dil[i] < 1 || w.size(2 + i) < 1) return {};
    const int64_t span = dil[i] * (w.size(2 + i) - 1) + 1, in = x.size(2 + i) + 2 * pad[i];
    if (in < span) return {};  // "kernel size can't be greater than actual input size"
    sizes[2 + i] = (in - span) / stride[i] + 1;
  }
  return at::empty(sizes, x.options());
}

// F.batch_norm in inference (training=False): a new tensor of the input's shape. Training updates
// the running statistics in place: the Python path.
at::Tensor batch_norm(const Bound& b) {
  at::Tensor x, mean, var, w, bias;
  if (!meta_operand(b.get("input"), &x) || !meta_operand(b.get("running_mean"), &mean) || !meta_operand(b.get("running_var"), &var) ||
      !opt_tensor(b.get("weight"), &w) || !opt_tensor(b.get("bias"), &bias) || !opt_double(b.get("momentum")) || !opt_double(b.get("eps")))
    return {};
  bool training = false;
  if (PyObject* o = b.get("training"); o && (!as_bool(o, &training) || training)) return {};
  if (x.dim() < 2 || !x.is_contiguous() || !is_float(x.scalar_type())) return {};
  for (const at::Tensor* p : {&mean, &var, &w, &bias})
    if (p->defined() && (p->dim() != 1 || p->size(0) != x.size(1) || p->scalar_type() != x.scalar_type())) return {};
  return at::empty(x.sizes(), x.options());
}

// F.max_pool2d without indices (ceil_mode off): PyTorch's pooling_output_shape.
at::Tensor max_pool2d(const Bound& b) {
  at::Tensor x;
  int64_t kernel[2], stride[2], pad[2] = {0, 0}, dil[2] = {1, 1};
  if (!meta_operand(b.get("input"), &x) || !as_pair(b.get("kernel_size"), kernel)) return {};
  PyObject* s = b.get("stride");
  std::vector<int64_t> none;
  if (absent(s) || (as_ints(s, &none, false) && none.empty())) {
    stride[0] = kernel[0];
    stride[1] = kernel[1];
  } else if (!as_pair(s, stride)) {
    return {};
  }
  if (PyObject* o = b.get("padding"); o && !as_pair(o, pad)) return {};
  if (PyObject* o = b.get("dilation"); o && !as_pair(o, dil)) return {};
  for (const char* flag : {"ceil_mode", "return_indices"}) {
    bool v = false;
    if (PyObject* o = b.get(flag); o && (!as_bool(o, &v) || v)) return {};
  }
  if (!nchw(x) || x.numel() == 0) return {};
  std::vector<int64_t> sizes = {x.size(0), x.size(1), 0, 0};
  for (int i = 0; i < 2; ++i) {
    if (kernel[i] < 1 || stride[i] < 1 || dil[i] < 1 || pad[i] < 0 || pad[i] > kernel[i] / 2) return {};
    const int64_t n = x.size(2 + i) + 2 * pad[i] - dil[i] * (kernel[i] - 1) - 1;
    if (n < 0) return {};
    sizes[2 + i] = n / stride[i] + 1;
  }
  return at::empty(sizes, x.options());
}

// F.adaptive_avg_pool2d to one pixel: ATen computes it as mean over the last two dimensions.
at::Tensor adaptive_avg_pool2d(const Bound& b) {
  at::Tensor x;
  int64_t out[2];
  if (!meta_operand(b.get("input"), &x) || !as_pair(b.get("output_size"), out) || out[0] != 1 || out[1] != 1) return {};
  if (!nchw(x) || x.numel() == 0) return {};
  return at::meta::mean(x, std::vector<int64_t>{-1, -2}, true, std::nullopt);
}

// F.relu / F.silu (Python functions around torch.relu / torch._C._nn.silu); in place: the Python path.
at::Tensor activation(Kind kind, const Bound& b) {
  at::Tensor x;
  bool inplace = false;
  if (!meta_operand(b.get("input"), &x)) return {};
  if (PyObject* o = b.get("inplace"); o && (!as_bool(o, &inplace) || inplace)) return {};
  if (kind == Kind::kRelu) {
    if (x.scalar_type() == at::kBool || (!at::isSignedType(x.scalar_type()) && !at::isFloatingType(x.scalar_type()))) return {};
    return at::meta::clamp_min(x, 0);
  }
  if (!is_float(x.scalar_type())) return {};
  return at::meta::silu(x);
}

// torch.cat: a KV cache grows by one every decoding step. PyTorch's meta kernel for it is a Python
// reference whose type promotion imports sympy on first use (2.6 s of decode_kv's first call on a
// fresh GPU machine); ATen's structured meta function computes the same result.
at::Tensor cat(const Bound& b) {
  PyObject* seq = b.get("tensors");
  if (!seq || !(PyList_Check(seq) || PyTuple_Check(seq)) || PySequence_Fast_GET_SIZE(seq) == 0) return {};
  std::vector<at::Tensor> ts;
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); ++i) {
    at::Tensor t;
    if (!meta_operand(PySequence_Fast_GET_ITEM(seq, i), &t)) return {};
    ts.push_back(std::move(t));
  }
  int64_t dim = 0;
  if (PyObject* o = b.get("dim"); o && !as_int(o, &dim)) return {};
  return at::meta::cat(ts, dim);
}

at::Tensor composite(const Sig& sig, const Bound& b) {
  at::Tensor x, y, z;
  switch (sig.kind) {
    case Kind::kSoftmax: return softmax(b, false);
    case Kind::kLogSoftmax: return softmax(b, true);
    case Kind::kLayerNorm: return layer_norm(b);
    case Kind::kEmbedding: return embedding(b);
    case Kind::kLinear: return linear(b);
    case Kind::kMatmul:
      if (!meta_operand(b.get("input"), &x) || !meta_operand(b.get("other"), &y)) return {};
      return matmul_result(x, y);
    case Kind::kMm: case Kind::kBmm:
      if (!meta_operand(b.get("input"), &x) || !meta_operand(b.get("mat2"), &y) || !same_float({&x, &y})) return {};
      return sig.kind == Kind::kMm ? at::meta::mm(x, y) : at::meta::bmm(x, y);
    case Kind::kAddmm: case Kind::kBaddbmm: {
      const bool mm = sig.kind == Kind::kAddmm;
      at::Scalar beta = 1, alpha = 1;
      if (!meta_operand(b.get("input"), &x) || !meta_operand(b.get(mm ? "mat1" : "batch1"), &y) ||
          !meta_operand(b.get(mm ? "mat2" : "batch2"), &z) || !same_float({&x, &y, &z}))
        return {};
      if (PyObject* o = b.get("beta"); o && !number(o, &beta)) return {};
      if (PyObject* o = b.get("alpha"); o && !number(o, &alpha)) return {};
      return mm ? at::meta::addmm(x, y, z, beta, alpha) : at::meta::baddbmm(x, y, z, beta, alpha);
    }
    case Kind::kSum: case Kind::kMean: case Kind::kAmax: case Kind::kAmin: return reduction(sig.kind, b);
    case Kind::kTril: case Kind::kTriu: {
      int64_t diagonal = 0;
      if (!meta_operand(b.get("input"), &x)) return {};
      if (PyObject* o = b.get("diagonal"); o && !as_int(o, &diagonal)) return {};
      return sig.kind == Kind::kTril ? at::meta::tril(x, diagonal) : at::meta::triu(x, diagonal);
    }
    case Kind::kMaskedFill: return masked_fill(b);
    case Kind::kBitwiseNot:
      if (!meta_operand(b.get("input"), &x) || !at::isIntegralType(x.scalar_type(), /*includeBool=*/true)) return {};
      return at::meta::bitwise_not(x);
    case Kind::kPow: {
      at::Scalar e;
      if (!meta_operand(b.get("input"), &x) || !is_float(x.scalar_type())) return {};
      PyObject* o = b.get("exponent");
      if (meta_operand(o, &y)) return is_float(y.scalar_type()) ? at::meta::pow(x, y) : at::Tensor();
      if (!number(o, &e)) return {};
      return at::meta::pow(x, e);
    }
    case Kind::kSquare:  // pow(x, 2) (a loss's x.square())
      if (!meta_operand(b.get("input"), &x) || !is_float(x.scalar_type())) return {};
      return at::meta::pow(x, at::Scalar(2));
    case Kind::kTo: {
      at::ScalarType t;
      if (!meta_operand(b.get("input"), &x) || !as_dtype(b.get("dtype"), &t)) return {};
      return cast(x, t);
    }
    case Kind::kCast:
      if (!meta_operand(b.get("input"), &x)) return {};
      return cast(x, sig.cast);
    case Kind::kTypeAs:
      if (!meta_operand(b.get("input"), &x) || !meta_operand(b.get("other"), &y)) return {};
      return cast(x, y.scalar_type());
    case Kind::kSdpa: return sdpa(b);
    case Kind::kArange: return arange(b);
    case Kind::kConv2d: return conv2d(b);
    case Kind::kBatchNorm: return batch_norm(b);
    case Kind::kMaxPool2d: return max_pool2d(b);
    case Kind::kAdaptiveAvgPool2d: return adaptive_avg_pool2d(b);
    case Kind::kRelu: case Kind::kSilu: return activation(sig.kind, b);
    case Kind::kCat: return cat(b);
  }
  return {};
}

// Tensor methods by name (self is the first parameter, never a keyword).
const std::unordered_map<std::string, Sig>& composite_methods() {
  static const auto* m = [] {
    auto* t = new std::unordered_map<std::string, Sig>();
    auto add = [&](const char* name, Sig s) {
      s.positional_only = 1;
      (*t)[name] = std::move(s);
    };
    add("softmax", {Kind::kSoftmax, {"input", "dim", "dtype"}, 2});
    add("log_softmax", {Kind::kLogSoftmax, {"input", "dim", "dtype"}, 2});
    add("matmul", {Kind::kMatmul, {"input", "other"}, 2});
    add("__matmul__", {Kind::kMatmul, {"input", "other"}, 2, 2});
    add("mm", {Kind::kMm, {"input", "mat2"}, 2});
    add("bmm", {Kind::kBmm, {"input", "mat2"}, 2});
    add("addmm", {Kind::kAddmm, {"input", "mat1", "mat2", "beta", "alpha"}, 3, 3});
    add("baddbmm", {Kind::kBaddbmm, {"input", "batch1", "batch2", "beta", "alpha"}, 3, 3});
    add("sum", {Kind::kSum, {"input", "dim", "keepdim", "dtype"}, 1, 3});
    add("mean", {Kind::kMean, {"input", "dim", "keepdim", "dtype"}, 1, 3});
    add("amax", {Kind::kAmax, {"input", "dim", "keepdim"}, 1});
    add("amin", {Kind::kAmin, {"input", "dim", "keepdim"}, 1});
    add("tril", {Kind::kTril, {"input", "diagonal"}, 1});
    add("triu", {Kind::kTriu, {"input", "diagonal"}, 1});
    add("masked_fill", {Kind::kMaskedFill, {"input", "mask", "value"}, 3});
    add("bitwise_not", {Kind::kBitwiseNot, {"input"}, 1});
    add("__invert__", {Kind::kBitwiseNot, {"input"}, 1});
    add("pow", {Kind::kPow, {"input", "exponent"}, 2});
    add("__pow__", {Kind::kPow, {"input", "exponent"}, 2, 2});
    add("square", {Kind::kSquare, {"input"}, 1});
    add("to", {Kind::kTo, {"input", "dtype"}, 2, 2});
    add("type_as", {Kind::kTypeAs, {"input", "other"}, 2, 2});
    for (auto [name, type] : std::initializer_list<std::pair<const char*, at::ScalarType>>{
             {"float", at::kFloat}, {"half", at::kHalf}, {"bfloat16", at::kBFloat16}, {"double", at::kDouble}}) {
      Sig s{Kind::kCast, {"input"}, 1, 1};
      s.cast = type;
      add(name, s);
    }
    return t;
  }();
  return *m;
}

// Functions by identity (torch.*, torch.nn.functional.*, operator.*), built on first use.
const std::unordered_map<PyObject*, Sig>& composite_functions() {
  static const auto* m = [] {
    auto* t = new std::unordered_map<PyObject*, Sig>();  // never freed: holds references to module attributes
    auto add = [&](const char* module, const char* name, Sig s) {
      PyObject* mod = PyImport_ImportModule(module);
      PyObject* f = mod ? PyObject_GetAttrString(mod, name) : nullptr;
      Py_XDECREF(mod);
      if (f) (*t)[f] = std::move(s);
      else PyErr_Clear();
    };
    add("torch.nn.functional", "softmax", {Kind::kSoftmax, {"input", "dim", "_stacklevel", "dtype"}, 2});
    add("torch.nn.functional", "log_softmax", {Kind::kLogSoftmax, {"input", "dim", "_stacklevel", "dtype"}, 2});
    add("torch", "softmax", {Kind::kSoftmax, {"input", "dim", "dtype"}, 2});
    add("torch", "log_softmax", {Kind::kLogSoftmax, {"input", "dim", "dtype"}, 2});
    add("torch.nn.functional", "layer_norm", {Kind::kLayerNorm, {"input", "normalized_shape", "weight", "bias", "eps"}, 2});
    add("torch", "layer_norm", {Kind::kLayerNorm, {"input", "normalized_shape", "weight", "bias", "eps", "cudnn_enable"}, 2});
    add("torch.nn.functional", "embedding",
        {Kind::kEmbedding, {"input", "weight", "padding_idx", "max_norm", "norm_type", "scale_grad_by_freq", "sparse"}, 2});
    add("torch", "embedding", {Kind::kEmbedding, {"weight", "indices", "padding_idx", "scale_grad_by_freq", "sparse"}, 2});
    add("torch._C._nn", "linear", {Kind::kLinear, {"input", "weight", "bias"}, 2});
    add("torch", "matmul", {Kind::kMatmul, {"input", "other"}, 2});
    add("operator", "matmul", {Kind::kMatmul, {"input", "other"}, 2, 2, 2});
    add("torch", "mm", {Kind::kMm, {"input", "mat2"}, 2});
    add("torch", "bmm", {Kind::kBmm, {"input", "mat2"}, 2});
    add("torch", "addmm", {Kind::kAddmm, {"input", "mat1", "mat2", "beta", "alpha"}, 3, 3});
    add("torch", "baddbmm", {Kind::kBaddbmm, {"input", "batch1", "batch2", "beta", "alpha"}, 3, 3});
    add("torch", "sum", {Kind::kSum, {"input", "dim", "keepdim", "dtype"}, 1, 3});
    add("torch", "mean", {Kind::kMean, {"input", "dim", "keepdim", "dtype"}, 1, 3});
    add("torch", "arange", {Kind::kArange, {"start", "end", "step", "dtype", "layout", "device", "pin_memory", "requires_grad"}, 1, 3});
    add("torch", "amax", {Kind::kAmax, {"input", "dim", "keepdim"}, 1});
    add("torch", "amin", {Kind::kAmin, {"input", "dim", "keepdim"}, 1});
    add("torch", "tril", {Kind::kTril, {"input", "diagonal"}, 1});
    add("torch", "triu", {Kind::kTriu, {"input", "diagonal"}, 1});
    add("torch", "masked_fill", {Kind::kMaskedFill, {"input", "mask", "value"}, 3});
    add("torch", "bitwise_not", {Kind::kBitwiseNot, {"input"}, 1});
    add("operator", "invert", {Kind::kBitwiseNot, {"input"}, 1, 1, 1});
    add("torch", "pow", {Kind::kPow, {"input", "exponent"}, 2});
    add("torch", "square", {Kind::kSquare, {"input"}, 1});
    add("operator", "pow", {Kind::kPow, {"input", "exponent"}, 2, 2, 2});
    add("torch._C._nn", "scaled_dot_product_attention",
        {Kind::kSdpa, {"query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa"}, 3, 6});
    add("torch", "conv2d", {Kind::kConv2d, {"input", "weight", "bias", "stride", "padding", "dilation", "groups"}, 2});
    add("torch.nn.functional", "batch_norm",
        {Kind::kBatchNorm, {"input", "running_mean", "running_var", "weight", "bias", "training", "momentum", "eps"}, 3});
    add("torch.nn.functional", "max_pool2d",
        {Kind::kMaxPool2d, {"input", "kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices"}, 2});
    add("torch.nn.functional", "adaptive_avg_pool2d", {Kind::kAdaptiveAvgPool2d, {"input", "output_size"}, 2});
    add("torch.nn.functional", "relu", {Kind::kRelu, {"input", "inplace"}, 1});
    add("torch.nn.functional", "silu", {Kind::kSilu, {"input", "inplace"}, 1});
    for (const char* name : {"cat", "concat", "concatenate"}) add("torch", name, {Kind::kCat, {"tensors", "dim"}, 1});
    return t;
  }();
  return *m;
}

}  // namespace

PyObject* fast_composite(PyObject* target, const std::string& method, PyObject* args, PyObject* kwargs) {
  const Sig* sig = nullptr;
  if (method.empty()) {
    auto it = composite_functions().find(target);
    if (it != composite_functions().end()) sig = &it->second;
  } else {
    auto it = composite_methods().find(method);
    if (it != composite_methods().end()) sig = &it->second;
  }
  Bound b;
  if (!sig || !bind(*sig, args, kwargs, &b)) return nullptr;
  at::Tensor result;
  try {
    result = with_autograd([&] { return composite(*sig, b); });
  } catch (const std::exception&) {
    return nullptr;  // the Python path raises the operator's own error
  }
  if (!result.defined()) return nullptr;
  return THPVariable_Wrap(std::move(result));
}

}  // namespace kiln::frontend::fast_meta
