// The frontend's window onto tensors and global autograd state (see frontend/tensor_probe.h).
// This and module.cpp are the only translation units that include PyTorch headers.
#include "frontend/objects/tensor_probe.h"

#include <ATen/ATen.h>
#include <ATen/SavedTensorHooks.h>
#include <ATen/autocast_mode.h>
#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>
#include <memory>
#include <vector>
#include <c10/core/DefaultDtype.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/Device.h>

#include "support/str_builder.h"
#include "torch_bridge/autograd_node.h"

namespace kiln::frontend {

bool probe_is_tensor(PyObject* o) { return THPVariable_Check(o); }

bool probe_read(PyObject* o, TensorFacts* f) {
  if (!THPVariable_Check(o)) return false;
  const at::Tensor& t = THPVariable_Unpack(o);
  f->type = Py_TYPE(o);
  f->dispatch_keys = t.key_set().raw_repr();
  f->dtype = static_cast<int>(t.scalar_type());
  f->device_type = static_cast<int>(t.device().type());
  f->device_index = t.device().index();
  f->requires_grad = t.requires_grad();
  auto sz = t.sizes();
  f->sizes.assign(sz.begin(), sz.end());
  if (t.layout() == at::kStrided) {
    auto st = t.strides();
    f->strides.assign(st.begin(), st.end());
  } else {
    f->strides.clear();
  }
  return true;
}

// Sizes and strides against the facts. Dynamic dimensions: sizes bind symbols (in the symbol range:
// sizes 0 and 1 are specialised), then strides must equal their expressions under the binding.
bool probe_layout_matches(const int64_t* sz, const int64_t* st, size_t ndim, const TensorFacts& f, SymbolBinding* b) {
  if (ndim != f.sizes.size()) return false;
  if (f.size_symbol.empty()) {
    for (size_t i = 0; i < ndim; ++i)
      if (sz[i] != f.sizes[i]) return false;
    if (!f.strides.empty())
      for (size_t i = 0; i < ndim; ++i)
        if (st[i] != f.strides[i]) return false;
    return true;
  }
  if (!b) return false;
  for (size_t i = 0; i < ndim; ++i) {
    int s = f.size_symbol[i];
    if (s < 0) {
      if (sz[i] != f.sizes[i]) return false;
      continue;
    }
    if (!sym::in_symbol_range(sz[i])) return false;
    uint64_t bit = uint64_t{1} << s;
    if (b->bound & bit) {
      if (b->values[s] != sz[i]) return false;
    } else {
      b->values[s] = sz[i];
      b->bound |= bit;
    }
  }
  if (f.strides.empty()) return true;
  try {
    for (size_t i = 0; i < ndim; ++i)
      if (st[i] != f.stride_expr[i].eval(b->values)) return false;
  } catch (const std::exception&) {  // an int64 overflow: not this layout
    return false;
  }
  return true;
}

// The value of a size expression, false when it overflows int64.
static bool try_eval(const sym::Expr& e, const int64_t* values, int64_t* out) {
  try {
    *out = e.eval(values);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

bool probe_matches(PyObject* o, const TensorFacts& f, SymbolBinding* binding) {
  if (Py_TYPE(o) != f.type) return false;
  const at::Tensor& t = THPVariable_Unpack(o);
  if (t.key_set().raw_repr() != f.dispatch_keys || static_cast<int>(t.scalar_type()) != f.dtype ||
      static_cast<int>(t.device().type()) != f.device_type || t.device().index() != f.device_index ||
      t.requires_grad() != f.requires_grad)
    return false;
  return probe_layout_matches(t.sizes().data(), t.strides().data(), t.dim(), f, binding);
}

static std::string dtype_short(int dt) {
  switch (static_cast<at::ScalarType>(dt)) {
    case at::kFloat: return "f32";
    case at::kDouble: return "f64";
    case at::kHalf: return "f16";
    case at::kBFloat16: return "bf16";
    case at::kLong: return "i64";
    case at::kInt: return "i32";
    case at::kShort: return "i16";
    case at::kChar: return "i8";
    case at::kByte: return "u8";
    case at::kBool: return "b8";
    case at::kComplexFloat: return "c64";
    case at::kComplexDouble: return "c128";
    default: return c10::toString(static_cast<at::ScalarType>(dt));
  }
}

template <class V>
static std::string join(const V& v) {
  kiln::support::StrBuilder os;
  os << "[";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << "]";
  return os.str();
}

std::string probe_mismatch(PyObject* o, const TensorFacts& f) {
  if (!THPVariable_Check(o)) return std::string("expected a tensor, got ") + Py_TYPE(o)->tp_name;
  TensorFacts g;
  probe_read(o, &g);
  kiln::support::StrBuilder os;
  if (g.type != f.type) os << "type mismatch: expected " << f.type->tp_name << ", actual " << g.type->tp_name;
  else if (g.dispatch_keys != f.dispatch_keys) os << "dispatch key set mismatch";
  else if (g.dtype != f.dtype) os << "dtype mismatch: expected " << dtype_short(f.dtype) << ", actual " << dtype_short(g.dtype);
  else if (g.device_type != f.device_type) os << "device type mismatch";
  else if (g.device_index != f.device_index) os << "device index mismatch: expected " << f.device_index << ", actual " << g.device_index;
  else if (g.requires_grad != f.requires_grad) os << "requires_grad mismatch: expected " << f.requires_grad << ", actual " << g.requires_grad;
  else if (g.sizes.size() != f.sizes.size()) os << "rank mismatch: expected " << f.sizes.size() << ", actual " << g.sizes.size();
  else {
    for (size_t i = 0; i < g.sizes.size(); ++i) {
      bool dynamic = !f.size_symbol.empty() && f.size_symbol[i] >= 0;
      if (dynamic && g.sizes[i] < 2) { os << "dynamic dimension " << i << " has size " << g.sizes[i] << " (sizes 0 and 1 are specialised)"; return os.str(); }
      if (!dynamic && g.sizes[i] != f.sizes[i]) { os << "size mismatch at index " << i << ": expected " << f.sizes[i] << ", actual " << g.sizes[i]; return os.str(); }
    }
    if (!f.size_symbol.empty()) {
      SymbolBinding b;
      for (size_t i = 0; i < g.sizes.size(); ++i)
        if (f.size_symbol[i] >= 0) b.values[f.size_symbol[i]] = g.sizes[i];
      for (size_t i = 0; i < g.strides.size() && !f.strides.empty(); ++i)
        if (int64_t want = 0; !try_eval(f.stride_expr[i], b.values, &want) || g.strides[i] != want) { os << "stride mismatch at index " << i << ": expected " << f.stride_expr[i].str() << ", actual " << g.strides[i]; return os.str(); }
      os << "sizes shared by two dynamic dimensions differ";  // duck sizing
      return os.str();
    }
    if (!f.strides.empty())
      for (size_t i = 0; i < g.strides.size(); ++i)
        if (g.strides[i] != f.strides[i]) { os << "stride mismatch at index " << i << ": expected " << f.strides[i] << ", actual " << g.strides[i]; return os.str(); }
  }
  return os.str();
}

std::string probe_describe(const TensorFacts& f) {
  std::string s = dtype_short(f.dtype);
  if (f.size_symbol.empty()) {
    s += join(f.sizes);
  } else {
    std::vector<std::string> dims;
    for (size_t i = 0; i < f.sizes.size(); ++i) dims.push_back(f.size_symbol[i] < 0 ? std::to_string(f.sizes[i]) : "s" + std::to_string(f.size_symbol[i]));
    s += join(dims);
  }
  if (f.device_type != static_cast<int>(at::kCPU))
    s += " " + c10::Device(static_cast<c10::DeviceType>(f.device_type), static_cast<c10::DeviceIndex>(f.device_index)).str();
  if (f.requires_grad) s += " requires_grad";
  return s;
}

std::string probe_describe_tensor(PyObject* t) {
  if (probe_is_tensor(t) && probe_is_symbolic_tensor(t)) {
    const at::Tensor& x = THPVariable_Unpack(t);
    return dtype_short(static_cast<int>(x.scalar_type())) + join(probe_symbolic_sizes(t)) + (x.requires_grad() ? " requires_grad" : "");
  }
  TensorFacts f;
  if (!probe_read(t, &f)) return "";
  if (f.device_type == static_cast<int>(at::kMeta)) f.device_type = static_cast<int>(at::kCPU);
  return probe_describe(f);
}

PyObject* probe_make_meta(PyObject* o) {
  const at::Tensor& t = THPVariable_Unpack(o);
  at::Tensor m;
  {
    at::AutoDispatchBelowADInplaceOrView guard;  // plain meta allocation, no autograd history
    if (t.layout() == at::kStrided)
      m = at::empty_strided_symint(t.sym_sizes(), t.sym_strides(), t.options().device(at::kMeta).requires_grad(false));
    else
      m = at::empty(t.sizes(), t.options().device(at::kMeta).requires_grad(false));
  }
  kiln::bridge::requires_grad_like(m, t);
  return THPVariable_Wrap(m);
}

PyObject* probe_float_tensor(PyObject* f) {
  const double v = PyFloat_AsDouble(f);
  if (v == -1.0 && PyErr_Occurred()) return nullptr;
  at::AutoDispatchBelowADInplaceOrView guard;
  return THPVariable_Wrap(at::scalar_tensor(v, at::TensorOptions().dtype(at::kDouble)));
}

PyObject* probe_float64_meta() {
  at::AutoDispatchBelowADInplaceOrView guard;
  return THPVariable_Wrap(at::empty({}, at::TensorOptions().dtype(at::kDouble).device(at::kMeta)));
}

PyObject* probe_device(PyObject* o) {
  return THPDevice_New(THPVariable_Unpack(o).device());
}

bool probe_meta_key(PyObject* o, std::string& key) {
  if (probe_is_symbolic_tensor(o)) return false;
  const at::Tensor& t = THPVariable_Unpack(o);
  auto put = [&](int64_t v) { key.append(reinterpret_cast<const char*>(&v), sizeof v); };
  put(static_cast<int64_t>(t.scalar_type()));
  put(t.requires_grad());
  put(static_cast<int64_t>(t.layout()));
  put(t.dim());
  for (auto s : t.sizes()) put(s);
  if (t.layout() == at::kStrided)
    for (auto s : t.strides()) put(s);
  put(t.storage_offset());
  return true;
}

uint64_t probe_version(PyObject* o) { return THPVariable_Unpack(o)._version(); }

const void* probe_storage(PyObject* o) {
  const at::Tensor& t = THPVariable_Unpack(o);
  return t.has_storage() ? static_cast<const void*>(t.storage().unsafeGetStorageImpl()) : nullptr;
}

GlobalStateFacts probe_global_state() {
  GlobalStateFacts g;
  g.grad_enabled = c10::GradMode::is_enabled();
  g.inference_mode = c10::InferenceMode::is_enabled();
  g.default_dtype = static_cast<int>(c10::typeMetaToScalarType(c10::get_default_dtype()));
  g.autocast_cpu = at::autocast::is_autocast_enabled(at::kCPU);
  g.autocast_cuda = at::autocast::is_autocast_enabled(at::kCUDA);
  // The dtypes only matter while autocast is on (a graph captured under bfloat16 autocast must not
  // serve float16 autocast); off, they do not split the cache.
  if (g.autocast_cpu) g.autocast_cpu_dtype = static_cast<int>(at::autocast::get_autocast_dtype(at::kCPU));
  if (g.autocast_cuda) g.autocast_cuda_dtype = static_cast<int>(at::autocast::get_autocast_dtype(at::kCUDA));
  g.deterministic = at::globalContext().deterministicAlgorithms();
  return g;
}

std::string probe_describe_global_state(const GlobalStateFacts& g) {
  kiln::support::StrBuilder os;
  os << "grad_enabled=" << g.grad_enabled << ", inference_mode=" << g.inference_mode
     << ", default_dtype=" << dtype_short(g.default_dtype) << ", autocast_cpu=" << g.autocast_cpu;
  if (g.autocast_cpu) os << " (" << dtype_short(g.autocast_cpu_dtype) << ")";
  os << ", autocast_cuda=" << g.autocast_cuda;
  if (g.autocast_cuda) os << " (" << dtype_short(g.autocast_cuda_dtype) << ")";
  os << ", deterministic=" << g.deterministic;
  return os.str();
}

bool probe_grad_enabled() { return c10::GradMode::is_enabled(); }
void probe_set_grad_enabled(bool on) { c10::GradMode::set_enabled(on); }

bool probe_inference_enabled() { return c10::InferenceMode::is_enabled(); }

static std::vector<std::unique_ptr<c10::InferenceMode>>& inference_guards() {
  static thread_local std::vector<std::unique_ptr<c10::InferenceMode>> guards;
  return guards;
}

void probe_push_inference_mode(bool enabled) { inference_guards().push_back(std::make_unique<c10::InferenceMode>(enabled)); }

bool probe_pop_inference_mode() {
  auto& g = inference_guards();
  if (g.empty()) return false;
  g.pop_back();
  return true;
}

bool probe_is_inference(PyObject* o) { return THPVariable_Unpack(o).is_inference(); }

AutocastState probe_autocast_state() {
  AutocastState s;
  s.cpu = at::autocast::is_autocast_enabled(at::kCPU);
  s.cuda = at::autocast::is_autocast_enabled(at::kCUDA);
  s.cpu_dtype = static_cast<int>(at::autocast::get_autocast_dtype(at::kCPU));
  s.cuda_dtype = static_cast<int>(at::autocast::get_autocast_dtype(at::kCUDA));
  s.cache = at::autocast::is_autocast_cache_enabled();
  s.nesting = at::autocast::decrement_nesting() + 1;  // read by a step down and back
  at::autocast::increment_nesting();
  return s;
}

void probe_restore_autocast_state(const AutocastState& s) {
  at::autocast::set_autocast_enabled(at::kCPU, s.cpu);
  at::autocast::set_autocast_enabled(at::kCUDA, s.cuda);
  at::autocast::set_autocast_dtype(at::kCPU, static_cast<at::ScalarType>(s.cpu_dtype));
  at::autocast::set_autocast_dtype(at::kCUDA, static_cast<at::ScalarType>(s.cuda_dtype));
  at::autocast::set_autocast_cache_enabled(s.cache);
  int64_t now = at::autocast::decrement_nesting();
  while (now > s.nesting) now = at::autocast::decrement_nesting();
  while (now < s.nesting) now = at::autocast::increment_nesting();
  if (s.nesting == 0) at::autocast::clear_cache();  // as leaving the outermost block does
}

bool probe_saved_tensor_hooks_active() { return !at::SavedTensorDefaultHooks::get_tls_state().stack.empty(); }

}  // namespace kiln::frontend
