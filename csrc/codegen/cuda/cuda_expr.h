// Element types, literals, index analysis and expression emission for the CUDA generator
// (cuda_codegen.cpp renders whole kernels from these).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ir/loop_ir.h"
#include "support/str_builder.h"

namespace kiln::codegen::cuda {
using namespace ir;
using support::StrBuilder;

constexpr int kPointwiseBlock = 256;
constexpr int64_t kMaxGrid = 65536;  // pointwise grids loop (grid-stride) past this
// 32-bit index math when every index and loop space stays below this (leaves room for the
// grid stride added to an index before the loop test).
constexpr int64_t kIndex32Limit = (int64_t{1} << 31) - (int64_t{1} << 25);

// Kernels for runtime sizes (ir/size_template.h): while a SpellingScope is alive on this thread,
// the program's integers listed in the spelling are rendered as C++ over the size symbols
// s0, s1... (kernel parameters) instead of as literals.
class SpellingScope {
 public:
  explicit SpellingScope(const IntSpelling* s);
  ~SpellingScope();
};
// An integer field of the program: its spelling, else its literal; whether it is spelled.
std::string int_text(const int64_t& field);
bool is_symbolic(const int64_t& field);
bool any_symbolic(const std::vector<int64_t>& fields);
// An index with its symbolic integers spelled out.
std::string index_text(const Index& i);
// A product of integer fields (empty: 1) as C++: a literal when none is symbolic, else
// "(literal*spelled*...)" (the literal left out when 1).
std::string product_text(const std::vector<const int64_t*>& fields);
std::string product_text(const std::vector<int64_t>& fields);

bool is_half(DType t);
// Element types as C++ spells them (NVRTC has no <cstdint>), 16-bit floats as the prefix's.
const char* cuda_ctype(DType t);
// Temporaries hold 16-bit floats as float.
const char* temp_type(DType t);
std::string literal(double v, DType t);
// Converts a loaded element to its temporary, and a temporary to a stored element.
std::string from_storage(DType t, const std::string& v);
std::string to_storage(DType t, const std::string& v);

// Largest absolute value an index (and every subexpression of it) takes; -1 if a part
// exceeds `limit` (then 64-bit math is needed).
int64_t magnitude(const Index& e, const VarRanges& r, int64_t limit);
void for_each_node(const ExprPtr& e, const std::function<void(const Expr&)>& f);
// The variables of a stage: outer ones, then its inner ones, with their extents.
VarRanges stage_ranges(const Kernel& k, const Stage& s);
int64_t product(const std::vector<int64_t>& v);
bool kernel_fits_int32(const Program& p, const Kernel& k);
// Whether a stage may set the error flag: an integer division by a divisor that is not a nonzero
// constant. (Indirect indices are checked by a device-side assertion, no flag.)
bool stage_checks(const Stage& s);
// Whether an access at `idx` covers V consecutive, V-aligned elements as variable `v` runs
// over a group [base, base + V) with base a multiple of V.
bool vector_access(const Index& idx, int v, int V);
// Whether two expressions compute the same value at every point of the same loop space: the
// same tree (operators, types, constants bit for bit, loads of the same buffer at the same index).
bool same_expr(const ExprPtr& a, const ExprPtr& b);
// Whether an expression's value changes with variable v.
bool expr_uses_var(const ExprPtr& e, int v);
// Whether a load can be a vector load of V elements as variable v runs over a V-aligned group.
// A load through tensor-valued indices (an embedding's row gather) qualifies when the indices
// stay put within the group and each one moves the address by a multiple of V elements.
bool vector_load(const Program& p, const Expr& e, int v, int V);

// Emits statements computing an expression; identical nodes (by identity) are computed once.
// Loads listed in `vec_loads` read lane `lane` of an already loaded vector.
class ExprEmitter {
 public:
  ExprEmitter(const Program& p, StrBuilder& out, std::string indent, int& counter)
      : p_(p), out_(out), indent_(std::move(indent)), next_(counter) {}
  std::map<const Expr*, std::string> vec_loads;
  // Whole subexpressions already computed by an earlier stage and kept in registers (the row
  // value cache): the node is spelled as this C++ value and its operands are not emitted.
  std::map<const Expr*, std::string> values;
  std::string lane;
  // The element index of a load: its index, plus each tensor-valued index (emitted first) times
  // its stride, checked against its bound.
  std::string address(const Expr& e);
  std::string emit(const ExprPtr& e);

 private:
  std::string render(const ExprPtr& e);
  const Program& p_;
  StrBuilder& out_;
  std::string indent_;
  std::map<const Expr*, std::string> memo_;
  int& next_;
};

std::string store(const Program& p, int buf, const std::string& index, const std::string& v);

}  // namespace kiln::codegen::cuda
