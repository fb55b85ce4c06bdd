// Guards: the conditions under which a cache entry's captured graph is valid for a new call.
//
// A tree of nodes, one per source, each with leaf checks (type, identity, constant equality,
// tensor match, length, dict keys) and children reached through accessors; plus a global-state
// check at the root. Each access path is walked once and shared by every check below it.
// Checking runs no Python code: C-level dict/tuple access and the tensor probe only.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "frontend/guards/sources.h"
#include "frontend/objects/tensor_probe.h"

namespace kiln::frontend {

// A numpy array handed to the frame (the graph takes it as a tensor sharing its memory,
// torch.from_numpy): its buffer's element format; its shape and strides are the tensor facts'.
struct NdarrayFacts {
  std::string format;  // the buffer's struct format: "f", "d", "q", "?"...
  Py_ssize_t itemsize = 0;
};

// An object's writable, strided buffer as its guard reads it on every call: without allocating,
// strides in whole elements.
struct BufferLayout {
  static constexpr int kMaxDims = 64;  // numpy's own limit
  char format[16];
  Py_ssize_t itemsize = 0;
  int ndim = 0;
  int64_t shape[kMaxDims], strides[kMaxDims];
  // False, no exception set, when `o` exports no such buffer (or one past these limits).
  bool read(PyObject* o);
};

struct GuardLeaf {
  enum Kind { kType, kId, kEquals, kTensor, kLen, kDictKeys, kLacksKey, kHasKey, kSymInt, kNdarray, kFloat, kFloatCompare } kind;
  PyRef obj;            // kType: the type; kId: the object; kEquals: the constant; kDictKeys: tuple
                        // of keys; kLacksKey / kHasKey: the key a dict must not / must contain
  TensorFacts tensor;   // kTensor
  NdarrayFacts array;   // kNdarray: the format; `tensor` holds its layout (obj: numpy.ndarray)
  Py_ssize_t length = 0;  // kLen; kSymInt: the symbol an int binds (it must be an int >= 2);
                          // kFloat: what the value must be besides an exact float (kFloat* bits);
                          // kFloatCompare: 2 * the comparison (Py_LT..Py_GE) + its outcome, the
                          // value an exact float compared with the float `obj` (a branch on it)
  // kFloat conditions: a dynamic float used as a divisor, under a square root or a logarithm,
  // where Python raises for values the graph would compute on (0.0, a negative).
  static constexpr Py_ssize_t kFloatNonZero = 1, kFloatNonNegative = 2, kFloatPositive = 4;
  // A dynamic float that eager converts to a tensor's dtype with an overflow check (masked_fill's
  // and fill_'s value, where's scalar, clamp's bounds, a float16 power's exponent): it must convert
  // to that dtype (c10::checked_convert: no NaN or infinity for an integer type, a float type's
  // finite range). One bit per dtype; float_fits tells.
  static constexpr Py_ssize_t kFloatFitsInt64 = 8, kFloatFitsInt32 = 16, kFloatFitsInt16 = 32, kFloatFitsInt8 = 64,
                              kFloatFitsUInt8 = 128, kFloatFitsFloat32 = 256, kFloatFitsFloat16 = 512, kFloatFitsBFloat16 = 1024;
  // A dynamic float raised to a whole power `x ** e` (e in `obj`, a Python int): Python raises
  // OverflowError where a finite x gives an infinite power, the graph's float64 tensor gives inf;
  // the value must be one whose power is finite (or x itself inf or nan, which Python takes).
  static constexpr Py_ssize_t kFloatPowerFinite = 2048;
  bool weak = false;    // kId: obj is a weak reference to the object (the guard does not keep it
                        // alive; once it dies the guard fails)
  bool check(PyObject* v, SymbolBinding* binding = nullptr) const;
  // kId: the object itself, nullptr once a weakly held one died.
  PyObject* referent() const;
  std::string describe(const std::string& expr) const;
  std::string why_failed(PyObject* v) const;
};

bool float_compare(double x, double c, int op);  // x op c, op one of Py_LT..Py_GE
// The dtypes of the kFloatFits* bits: the bit, torch's name for the dtype, its range [lo, hi] (as
// doubles), whether infinities convert (a NaN converts where they do).
struct FloatFits {
  Py_ssize_t bit;
  const char* name;
  double lo, hi;
  bool inf;
};
constexpr int kNumFloatFits = 8;
extern const FloatFits kFloatFits[kNumFloatFits];
// Whether x converts without overflow to every dtype of the kFloatFits* bits in `bits` (as
// c10::checked_convert<To, double> decides).
bool float_fits(double x, Py_ssize_t bits);
// Whether Python's `x ** exponent` (a Python int) does not overflow: kFloatPowerFinite.
bool float_power_finite(double x, PyObject* exponent);

class GuardTree {
 public:
  GuardTree();
  ~GuardTree();
  void add(const SourcePtr& src, GuardLeaf leaf);
  void set_global_state(const GlobalStateFacts& g) { global_ = g; has_global_ = true; }
  // A container the capture mutates and writes back must not be the object of any other input
  // container (aliased, a write through one would not be seen through the other, and the
  // write-backs would clobber each other). Containers it only reads may alias each other (two
  // classes sharing one registry dict). Stored as {mutated, others...}, with why (for the guard
  // listing). Also two tensor inputs the capture found to be different objects (`a is b`).
  void add_distinct(SourcePtr mutated, std::vector<SourcePtr> others, const char* why) {
    others.insert(others.begin(), std::move(mutated));
    distinct_.push_back({std::move(others), why});
  }
  // Two sources that reached one tensor at capture: `a is b` was true, and the graph takes that
  // tensor once, so they must reach one object again.
  void add_same(SourcePtr a, SourcePtr b) { same_.push_back({std::move(a), std::move(b)}); }
  // Tensors whose identity the capture used as set members (`v in memo` over a module's
  // parameters): pairwise different objects. Checked in one pass over the sorted objects.
  void add_all_distinct(std::vector<SourcePtr> sources) { all_distinct_.push_back(std::move(sources)); }
  // Symbolic sizes: tensor guards with dynamic dimensions bind the env's symbols, then its shape
  // guards must hold.
  void set_shape_env(std::shared_ptr<sym::ShapeEnv> env) { shape_env_ = std::move(env); }
  const std::shared_ptr<sym::ShapeEnv>& shape_env() const { return shape_env_; }

  bool check(const FrameView& frame) const;
  // The first failing guard, as "<expr>: <reason>", or "" if all pass; `kind` (optional) gets
  // its GuardLeaf::Kind, or -1 when the global state or aliasing failed.
  std::string first_failure(const FrameView& frame, int* kind = nullptr) const;
  // Readable code, one guard a line: `check_tensor(L['x'], f32[4, 8])` ...
  std::string to_string() const;
  int num_leaves() const;

  struct Node;

 private:
  Node* node_for(const SourcePtr& src);
  std::unique_ptr<Node> root_;
  GlobalStateFacts global_;
  bool has_global_ = false;
  struct Distinct {
    std::vector<SourcePtr> sources;  // sources[0] is none of the others
    const char* why;
  };
  std::vector<Distinct> distinct_;
  std::vector<std::pair<SourcePtr, SourcePtr>> same_;
  std::vector<std::vector<SourcePtr>> all_distinct_;
  bool has_identities() const { return !distinct_.empty() || !same_.empty() || !all_distinct_.empty(); }
  std::shared_ptr<sym::ShapeEnv> shape_env_;
  // The distinct and same guards: where the guard tree holds, whether they hold too, else the
  // first that fails, described.
  bool identities_ok(const FrameView& frame) const;
  std::string identity_failure(const FrameView& frame) const;
  bool symbolic() const { return shape_env_ && !shape_env_->symbols().empty(); }
};

}  // namespace kiln::frontend
