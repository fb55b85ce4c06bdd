// Guard tree construction, evaluation, failure reporting and printing.
#include "frontend/guards/guards.h"

#include <algorithm>
#include <cmath>

#include <cstring>

#include "support/str_builder.h"

namespace kiln::frontend {

struct GuardTree::Node {
  SourcePtr source;  // null for the root
  std::vector<GuardLeaf> leaves;
  std::vector<std::unique_ptr<Node>> children;
};

GuardTree::GuardTree() : root_(std::make_unique<Node>()) {}
GuardTree::~GuardTree() = default;

bool BufferLayout::read(PyObject* o) {
  Py_buffer view;
  if (PyObject_GetBuffer(o, &view, PyBUF_RECORDS) != 0) {
    PyErr_Clear();
    return false;
  }
  const char* f = view.format ? view.format : "B";
  bool ok = view.itemsize > 0 && view.ndim <= kMaxDims && std::strlen(f) < sizeof format;
  if (ok) {
    std::strcpy(format, f);
    itemsize = view.itemsize;
    ndim = view.ndim;
  }
  for (int i = 0; ok && i < ndim; ++i) {
    shape[i] = view.shape[i];
    ok = view.strides[i] % itemsize == 0;
    strides[i] = view.strides[i] / itemsize;
  }
  PyBuffer_Release(&view);
  return ok;
}

// A numpy array against its guard: type, format, then its layout as the tensor facts'.
static bool ndarray_matches(PyObject* v, const GuardLeaf& l, SymbolBinding* binding, std::string* why) {
  if (reinterpret_cast<PyObject*>(Py_TYPE(v)) != l.obj.get()) {
    if (why) *why = std::string("expected a numpy.ndarray, actual ") + Py_TYPE(v)->tp_name;
    return false;
  }
  BufferLayout now;
  if (!now.read(v)) {
    if (why) *why = "expected a writable array";
    return false;
  }
  if (l.array.format != now.format || now.itemsize != l.array.itemsize) {
    if (why) *why = "expected element format '" + l.array.format + "', actual '" + now.format + "'";
    return false;
  }
  SymbolBinding local;
  if (probe_layout_matches(now.shape, now.strides, now.ndim, l.tensor, binding ? binding : &local)) return true;
  if (why) {
    support::StrBuilder b;
    b << "expected " << probe_describe(l.tensor) << ", actual shape (";
    for (int i = 0; i < now.ndim; ++i) b << (i ? ", " : "") << now.shape[i];
    b << ") strides (";
    for (int i = 0; i < now.ndim; ++i) b << (i ? ", " : "") << now.strides[i];
    b << ")";
    *why = b.str();
  }
  return false;
}

PyObject* GuardLeaf::referent() const {
  if (!weak) return obj.get();
  PyObject* o = PyWeakref_GET_OBJECT(obj.get());
  return o == Py_None ? nullptr : o;
}

// `x op c` for Python's comparison operators (Py_LT..Py_GE) on floats (NaN compares as Python's).
bool float_compare(double x, double c, int op) {
  switch (op) {
    case Py_LT: return x < c;
    case Py_LE: return x <= c;
    case Py_EQ: return x == c;
    case Py_NE: return x != c;
    case Py_GT: return x > c;
    case Py_GE: return x >= c;
  }
  return false;
}

bool GuardLeaf::check(PyObject* v, SymbolBinding* binding) const {
  switch (kind) {
    case kType: return reinterpret_cast<PyObject*>(Py_TYPE(v)) == obj.get();
    case kId: return v == referent();
    case kEquals: {
      if (v == obj.get()) return true;
      if (Py_TYPE(v) != Py_TYPE(obj.get())) return false;
      if (PyFloat_CheckExact(v)) {  // the same bits: -0.0 is not 0.0 (1 / t, copysign, str), a nan is itself
        const double a = PyFloat_AS_DOUBLE(v), b = PyFloat_AS_DOUBLE(obj.get());
        return std::memcmp(&a, &b, sizeof a) == 0;
      }
      int r = PyObject_RichCompareBool(v, obj.get(), Py_EQ);
      if (r < 0) { PyErr_Clear(); return false; }
      return r == 1;
    }
    case kTensor: return probe_matches(v, tensor, binding);
    case kFloat: {
      if (!PyFloat_CheckExact(v)) return false;
      const double x = PyFloat_AS_DOUBLE(v);
      return !((length & kFloatNonZero) && x == 0.0) && !((length & kFloatNonNegative) && !(x >= 0.0)) &&
             !((length & kFloatPositive) && !(x > 0.0)) && float_fits(x, length) &&
             !((length & kFloatPowerFinite) && !float_power_finite(x, obj.get()));
    }
    case kNdarray: return ndarray_matches(v, *this, binding, nullptr);
    case kFloatCompare: return PyFloat_CheckExact(v) && float_compare(PyFloat_AS_DOUBLE(v), PyFloat_AS_DOUBLE(obj.get()), length / 2) == (length & 1);
    case kSymInt: {
      if (!binding || !PyLong_CheckExact(v)) return false;
      int overflow = 0;
      long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
      if (overflow || !sym::in_symbol_range(x)) { PyErr_Clear(); return false; }
      uint64_t bit = uint64_t{1} << length;
      if (binding->bound & bit) return binding->values[length] == x;
      binding->values[length] = x;
      binding->bound |= bit;
      return true;
    }
    case kLen: {
      Py_ssize_t n = PyObject_Length(v);
      if (n < 0) { PyErr_Clear(); return false; }
      return n == length;
    }
    case kLacksKey:
    case kHasKey: {
      if (!PyDict_Check(v)) return false;
      int r = PyDict_Contains(v, obj.get());
      if (r < 0) { PyErr_Clear(); return false; }
      return r == (kind == kHasKey);
    }
    case kDictKeys: {
      if (!PyDict_Check(v) || PyDict_GET_SIZE(v) != PyTuple_GET_SIZE(obj.get())) return false;
      if (PyODict_Check(v)) {  // an OrderedDict's order is its own (move_to_end), not its storage's
        PyObject* it = PyODict_Type.tp_iter(v);
        if (!it) { PyErr_Clear(); return false; }
        bool same = true;
        for (Py_ssize_t i = 0; same && i < PyTuple_GET_SIZE(obj.get()); ++i) {
          PyObject* k = PyIter_Next(it);
          PyObject* want = PyTuple_GET_ITEM(obj.get(), i);
          int r = k == want ? 1 : k ? PyObject_RichCompareBool(k, want, Py_EQ) : 0;
          if (r < 0) PyErr_Clear();
          same = r == 1;
          Py_XDECREF(k);
        }
        Py_DECREF(it);
        if (PyErr_Occurred()) PyErr_Clear();
        return same;
      }
      Py_ssize_t pos = 0, i = 0;
      PyObject *k, *val;
      while (PyDict_Next(v, &pos, &k, &val)) {
        PyObject* want = PyTuple_GET_ITEM(obj.get(), i++);
        if (k == want) continue;
        int r = PyObject_RichCompareBool(k, want, Py_EQ);
        if (r < 0) PyErr_Clear();
        if (r != 1) return false;
      }
      return true;
    }
  }
  return false;
}

const FloatFits kFloatFits[kNumFloatFits] = {
    {GuardLeaf::kFloatFitsInt64, "int64", -9223372036854775808.0, 9223372036854775808.0, false},
    {GuardLeaf::kFloatFitsInt32, "int32", -2147483648.0, 2147483647.0, false},
    {GuardLeaf::kFloatFitsInt16, "int16", -32768.0, 32767.0, false},
    {GuardLeaf::kFloatFitsInt8, "int8", -128.0, 127.0, false},
    {GuardLeaf::kFloatFitsUInt8, "uint8", 0.0, 255.0, false},
    {GuardLeaf::kFloatFitsFloat32, "float32", -3.4028234663852886e38, 3.4028234663852886e38, true},
    {GuardLeaf::kFloatFitsFloat16, "float16", -65504.0, 65504.0, true},
    {GuardLeaf::kFloatFitsBFloat16, "bfloat16", -3.3895313892515355e38, 3.3895313892515355e38, true},
};

bool float_fits(double x, Py_ssize_t bits) {
  for (const FloatFits& f : kFloatFits) {
    if (!(bits & f.bit)) continue;
    if (x != x) {  // a float type takes NaN, an integer type does not
      if (!f.inf) return false;
      continue;
    }
    if (f.inf && std::isinf(x)) continue;
    if (x < f.lo || x > f.hi) return false;
  }
  return true;
}

bool float_power_finite(double x, PyObject* exponent) {
  const long e = PyLong_AsLong(exponent);
  if (PyErr_Occurred()) { PyErr_Clear(); return false; }
  // Python's float ** int computes libm's pow and raises where a finite base gives +-HUGE_VAL.
  return !std::isfinite(x) || std::isfinite(std::pow(x, static_cast<double>(e)));
}

static const char* const kCompareOps[] = {" < ", " <= ", " == ", " != ", " > ", " >= "};  // by Py_LT..Py_GE

// " and x != 0.0 and ..." for a kFloat guard's conditions.
static std::string float_conditions(const std::string& e, Py_ssize_t bits, PyObject* exponent) {
  std::string s;
  if (bits & GuardLeaf::kFloatNonZero) s += " and " + e + " != 0.0";
  if (bits & GuardLeaf::kFloatNonNegative) s += " and " + e + " >= 0.0";
  if (bits & GuardLeaf::kFloatPositive) s += " and " + e + " > 0.0";
  for (const FloatFits& f : kFloatFits)
    if (bits & f.bit) s += " and " + e + " converts to " + f.name;
  if ((bits & GuardLeaf::kFloatPowerFinite) && exponent) s += " and " + e + " ** " + py_repr(exponent) + " does not overflow";
  return s;
}

std::string GuardLeaf::describe(const std::string& e) const {
  switch (kind) {
    case kType: return "type(" + e + ") is " + reinterpret_cast<PyTypeObject*>(obj.get())->tp_name;
    case kId: {
      PyObject* o = referent();
      if (!o) return "id(" + e + ") == <an object that no longer exists>";
      return "id(" + e + ") == " + std::to_string(reinterpret_cast<uintptr_t>(o)) + "  # a " + Py_TYPE(o)->tp_name + (weak ? ", held weakly" : "");
    }
    case kEquals: return e + " == " + py_repr(obj.get());
    case kTensor: return "check_tensor(" + e + ", " + std::string(tensor.type->tp_name) + ", " + probe_describe(tensor) + ")";
    case kLen: return "len(" + e + ") == " + std::to_string(length);
    case kDictKeys: return "list(" + e + ".keys()) == " + py_repr(obj.get());
    case kLacksKey: return py_repr(obj.get()) + " not in " + e;
    case kHasKey: return py_repr(obj.get()) + " in " + e;
    case kSymInt: return "s" + std::to_string(length) + " = " + e + "  # an int >= 2";
    case kFloat: return "type(" + e + ") is float" + float_conditions(e, length, obj.get()) + "  # a dynamic float";
    case kFloatCompare: return std::string(length & 1 ? "" : "not ") + "(" + e + kCompareOps[length / 2] + py_repr(obj.get()) + ")  # a dynamic float";
    case kNdarray: return "check_ndarray(" + e + ", '" + array.format + "', " + probe_describe(tensor) + ")  # taken as torch.from_numpy(" + e + ")";
  }
  return "?";
}

std::string GuardLeaf::why_failed(PyObject* v) const {
  switch (kind) {
    case kTensor: return probe_mismatch(v, tensor);
    case kEquals:  // a tensor where a constant was: its description, not its values
      return "expected " + py_repr(obj.get()) + ", actual " + (probe_is_tensor(v) ? "a tensor " + probe_describe_tensor(v) : py_repr(v));
    case kType: return std::string("expected type ") + reinterpret_cast<PyTypeObject*>(obj.get())->tp_name + ", actual " + Py_TYPE(v)->tp_name;
    // Never the objects' repr: it can format whole tensors (or run arbitrary user code).
    case kId: {
      PyObject* o = referent();
      if (!o) return std::string("the object it was compiled for no longer exists; got a ") + Py_TYPE(v)->tp_name;
      return std::string("expected the same ") + Py_TYPE(o)->tp_name + " object, got another " + Py_TYPE(v)->tp_name;
    }
    case kLen: return "expected length " + std::to_string(length);
    case kDictKeys: return "expected keys " + py_repr(obj.get());
    case kLacksKey: return py_repr(obj.get()) + " was added";
    case kHasKey: return py_repr(obj.get()) + " is missing";
    case kNdarray: {
      std::string why;
      ndarray_matches(v, *this, nullptr, &why);
      return why;
    }
    case kFloat: return PyFloat_CheckExact(v) ? "expected a float" + float_conditions("it", length, obj.get()) + ", actual " + py_repr(v)
                                              : std::string("expected a float, actual ") + Py_TYPE(v)->tp_name;
    case kFloatCompare: return PyFloat_CheckExact(v) ? std::string("expected it") + kCompareOps[length / 2] + py_repr(obj.get()) + " to be " +
                                                           (length & 1 ? "true" : "false") + ", actual " + py_repr(v)
                                                     : std::string("expected a float, actual ") + Py_TYPE(v)->tp_name;
    case kSymInt: return PyLong_CheckExact(v) ? "expected an int >= 2, actual " + py_repr(v) + " (0 and 1 are specialised)"
                                              : std::string("expected an int, actual ") + Py_TYPE(v)->tp_name;
  }
  return "";
}

GuardTree::Node* GuardTree::node_for(const SourcePtr& src) {
  Node* parent = src->parent ? node_for(src->parent) : root_.get();
  for (auto& c : parent->children)
    if (c->source == src || c->source->repr() == src->repr()) return c.get();
  parent->children.push_back(std::make_unique<Node>());
  parent->children.back()->source = src;
  return parent->children.back().get();
}

void GuardTree::add(const SourcePtr& src, GuardLeaf leaf) {
  Node* n = node_for(src);
  for (const auto& l : n->leaves)  // skip exact duplicates
    if (l.kind == leaf.kind && l.kind != GuardLeaf::kTensor && l.obj.get() == leaf.obj.get() && l.length == leaf.length) return;
  n->leaves.push_back(std::move(leaf));
}


}  // namespace kiln::frontend

namespace kiln::frontend {

// Each node's value is computed once, from its parent's value, and shared by its leaves and
// children.
static bool check_children(const std::vector<std::unique_ptr<GuardTree::Node>>& children, PyObject* parent_value,
                           const FrameView& f, SymbolBinding* b) {
  for (const auto& c : children) {
    PyObject* v = parent_value ? c->source->step(parent_value) : c->source->root(f);
    if (!v) return false;
    for (const auto& l : c->leaves)
      if (!l.check(v, b)) return false;
    if (!c->children.empty() && !check_children(c->children, v, f, b)) return false;
  }
  return true;
}

// Every symbol bound by its tensor, then the shape guards over the bound values.
static bool shape_guards_hold(const sym::ShapeEnv& env, const SymbolBinding& b) {
  size_t n = env.symbols().size();
  uint64_t all = n >= 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1;
  if ((b.bound & all) != all) return false;
  return sym::ShapeGuards{env.guards(), static_cast<int>(n)}.check(b.values);
}

bool GuardTree::identities_ok(const FrameView& f) const {
  for (const auto& group : distinct_) {
    PyObject* first = group.sources[0]->fetch(f);
    for (size_t i = 1; i < group.sources.size(); ++i)
      if (group.sources[i]->fetch(f) == first) return false;
  }
  for (const auto& [a, b] : same_)
    if (a->fetch(f) != b->fetch(f)) return false;
  for (const auto& group : all_distinct_) {
    thread_local std::vector<PyObject*> objects;  // reused: no allocation per call
    objects.clear();
    for (const auto& s : group) objects.push_back(s->fetch(f));
    std::sort(objects.begin(), objects.end());
    if (std::adjacent_find(objects.begin(), objects.end()) != objects.end()) return false;
  }
  return true;
}

std::string GuardTree::identity_failure(const FrameView& f) const {
  for (const auto& group : distinct_)
    for (size_t i = 1; i < group.sources.size(); ++i)
      if (group.sources[i]->fetch(f) == group.sources[0]->fetch(f))
        return group.sources[0]->repr() + " (" + group.why + ") is now the same object as " + group.sources[i]->repr();
  for (const auto& [a, b] : same_)
    if (a->fetch(f) != b->fetch(f)) return a->repr() + " is no longer the same object as " + b->repr();
  for (const auto& group : all_distinct_)
    for (size_t i = 0; i < group.size(); ++i)
      for (size_t j = i + 1; j < group.size(); ++j)
        if (group[i]->fetch(f) == group[j]->fetch(f)) return group[i]->repr() + " is now the same object as " + group[j]->repr();
  return "";
}

bool GuardTree::check(const FrameView& f) const {
  if (has_global_ && !(probe_global_state() == global_)) return false;
  if (symbolic()) {
    SymbolBinding b;
    return check_children(root_->children, nullptr, f, &b) && shape_guards_hold(*shape_env_, b) &&
           (!has_identities() || identities_ok(f));
  }
  return check_children(root_->children, nullptr, f, nullptr) && (!has_identities() || identities_ok(f));
}

static std::string fail_children(const std::vector<std::unique_ptr<GuardTree::Node>>& children, const FrameView& f, int* kind,
                                 SymbolBinding* b) {
  for (const auto& c : children) {
    PyObject* v = c->source->fetch(f);
    if (!v) return c->source->repr() + ": no longer present";
    for (const auto& l : c->leaves)
      if (!l.check(v, b)) {
        if (kind) *kind = l.kind;
        return l.describe(c->source->repr()) + "  (" + l.why_failed(v) + ")";
      }
    std::string r = fail_children(c->children, f, kind, b);
    if (!r.empty()) return r;
  }
  return "";
}

std::string GuardTree::first_failure(const FrameView& f, int* kind) const {
  if (kind) *kind = -1;
  if (has_global_) {
    GlobalStateFacts now = probe_global_state();
    if (!(now == global_))
      return "global state changed: expected " + probe_describe_global_state(global_) + "; actual " + probe_describe_global_state(now);
  }
  SymbolBinding b;
  std::string r = fail_children(root_->children, f, kind, symbolic() ? &b : nullptr);
  if (r.empty() && symbolic() && !shape_guards_hold(*shape_env_, b)) {
    if (kind) *kind = GuardLeaf::kTensor;
    return "shape guard failed: " + sym::ShapeGuards{shape_env_->guards(), static_cast<int>(shape_env_->symbols().size())}.first_failure(b.values);
  }
  if (r.empty()) r = identity_failure(f);
  return r;
}

static void print_children(const std::vector<std::unique_ptr<GuardTree::Node>>& children, kiln::support::StrBuilder& os, int& count) {
  for (const auto& c : children) {
    for (const auto& l : c->leaves) { os << "  " << l.describe(c->source->repr()) << "\n"; ++count; }
    print_children(c->children, os, count);
  }
}

std::string GuardTree::to_string() const {
  kiln::support::StrBuilder os;
  int count = 0;
  if (has_global_) { os << "  global_state(" << probe_describe_global_state(global_) << ")\n"; ++count; }
  print_children(root_->children, os, count);
  if (symbolic()) {
    const auto& syms = shape_env_->symbols();
    for (size_t i = 0; i < syms.size(); ++i) os << "  # s" << i << " = " << syms[i].source << " (" << syms[i].hint << " when captured)\n";
    for (const auto& g : shape_env_->guards()) { os << "  check(" << g.str() << ")\n"; ++count; }
  }
  for (const auto& group : distinct_) {
    os << "  " << group.sources[0]->repr() << " is none of (";
    for (size_t i = 1; i < group.sources.size(); ++i) os << (i > 1 ? ", " : "") << group.sources[i]->repr();
    os << ")  # " << group.why << "\n";
    ++count;
  }
  for (const auto& [a, b] : same_) {
    os << "  " << a->repr() << " is " << b->repr() << "\n";
    ++count;
  }
  for (const auto& group : all_distinct_) {
    os << "  all different objects: ";
    for (size_t i = 0; i < group.size(); ++i) os << (i ? ", " : "") << group[i]->repr();
    os << "\n";
    ++count;
  }
  return os.str();
}

static int count_leaves(const std::vector<std::unique_ptr<GuardTree::Node>>& children) {
  int n = 0;
  for (const auto& c : children) n += static_cast<int>(c->leaves.size()) + count_leaves(c->children);
  return n;
}

int GuardTree::num_leaves() const { return count_leaves(root_->children) + (has_global_ ? 1 : 0); }

}  // namespace kiln::frontend
