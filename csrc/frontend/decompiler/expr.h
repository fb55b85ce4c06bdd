// Expressions as the decompiler's symbolic stack holds them: source text with its precedence,
// plus the little structure later steps need (display items, call parts, compare operands,
// assignment sinks, functions under construction). Also the markers CPython keeps on the value
// stack that are not Python expressions (NULL, iterators, saved locals, `with` exits).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "frontend/decompiler/code_desc.h"

namespace kiln::decompiler {

// Precedence, loosest to tightest (Python's grammar).
enum Prec : int {
  kPrecTuple = 0, kPrecYield = 0, kPrecLambda = 1, kPrecTernary = 2, kPrecOr = 3, kPrecAnd = 4, kPrecNot = 5,
  kPrecCompare = 6, kPrecBitOr = 7, kPrecBitXor = 8, kPrecBitAnd = 9, kPrecShift = 10, kPrecArith = 11,
  kPrecTerm = 12, kPrecUnary = 13, kPrecPower = 14, kPrecAwait = 15, kPrecAtom = 16
};

enum class ExKind {
  Value,       // any expression
  Const,       // a constant (cst points at it)
  Name,        // a plain variable name
  Null,        // CPython's NULL below a callable
  Iter,        // GET_ITER's result (a is the iterable)
  Sink,        // a value whose store names an assignment target (for target, unpack slot, with/except as)
  Display,     // tuple/list/set/dict under construction (items / keys)
  Slice,       // BUILD_SLICE (text is `a:b`)
  FString,     // text is the body between the quotes
  Function,    // MAKE_FUNCTION's result
  CodeRef,     // a code object constant
  Module,      // IMPORT_NAME's result
  ImportAttr,  // IMPORT_FROM's result
  Inplace,     // BINARY_OP with an in-place operator (a: target expression, b: operand)
  Compare,     // comparison (operands / ops for chains)
  Not,         // `not a`
  Saved,       // 3.12 LOAD_FAST_AND_CLEAR of an inlined comprehension's variable
  Accumulator, // the list/set/dict a comprehension appends to
  WithExit,    // BEFORE_WITH's bound __exit__
  Dummy,       // a value with no source meaning (RETURN_GENERATOR's, PUSH_EXC_INFO's)
  AssertError, // LOAD_ASSERTION_ERROR
  Starred,     // `*x` inside a display or call
  Chain,       // a value assigned to an attribute or item and kept for the next target of `a.x = b = v`
  BuildClass,  // LOAD_BUILD_CLASS's __build_class__
  Class,       // a class statement under construction (fn: its body; items: bases; keys: keyword names)
};

struct Ex;
struct Stmt;
using ExP = std::shared_ptr<Ex>;
struct SinkState;
struct FunctionInfo;

inline constexpr const char* kPercentForm = "<percent-format>";

struct Ex {
  ExKind kind = ExKind::Value;
  std::string text;
  int prec = kPrecAtom;
  const ConstDesc* cst = nullptr;
  ExP a, b;
  std::vector<ExP> items;            // Display items (Starred for *x); dict: values
  std::vector<ExP> keys;             // dict display keys (nullptr: `**value`)
  char display = 0;                  // '(' tuple, '[' list, '{' set, 'd' dict
  std::vector<ExP> operands;         // Compare chain operands
  std::vector<std::string> ops;      // Compare chain operators
  std::shared_ptr<SinkState> sink;
  int sink_index = 0;
  std::shared_ptr<FunctionInfo> fn;
  std::string name;                  // Module / ImportAttr / Saved / Name
  int level = 0;                     // Module: import level; FString: the Python minor version
  ExP fromlist;
  int op = 0;                        // Inplace: BINARY_OP arg
  // FString pieces: (true, escaped literal text) or (false, "{expr...}" replacement field).
  // Beside them, in operands/ops, the same pieces for the `'...%s...' % (v, ...)` form: a literal
  // (ops "%", a string constant) or a field's value and conversion ("s", "r", "a"; "" for a
  // field that form cannot spell). name == kPercentForm: only that form can spell this string
  // (before 3.12, a field whose expression holds a backslash or '#').
  std::vector<std::pair<bool, std::string>> fpieces;
  // A value assigned and still on the stack (`a = b = v`): the statement that assigned it, so the
  // next store of it extends that statement's targets instead of reading the variable back.
  unsigned long serial = 0;  // creation order: a value evaluated earlier has a smaller serial
  std::vector<Stmt>* chain_out = nullptr;
  size_t chain_index = 0;
  std::string chain_lhs, chain_rhs;
};

// Where a stored value's target name goes (for loops, unpacking, with/except `as`).
struct SinkState {
  enum class Kind { Target, Unpack } kind = Kind::Target;
  std::vector<std::string> targets;  // Unpack: one per slot ("" until stored); Target: [0]
  int filled = 0;
  int star = -1;                     // Unpack: index of the starred slot
  ExP value;                         // Unpack: the unpacked value
  std::shared_ptr<SinkState> parent; // nested unpack: the slot this unpack fills
  int parent_index = 0;
  std::string result() const;        // the target list as source
};

struct FunctionInfo {
  const CodeDesc* code = nullptr;
  std::vector<std::string> defaults;                        // rendered positional defaults
  std::vector<std::pair<std::string, std::string>> kwdefaults;
  std::vector<std::string> decorators;                      // outermost first
  std::vector<std::pair<std::string, std::string>> annotations;  // parameter (or "return") -> source
  std::string type_params;  // 3.12 `def f[T, *Ts, **P]`: the bracket's contents (PEP 695), or ""
  const CodeDesc* generic_scope = nullptr;  // a `<generic parameters of f>` scope not called yet
};

ExP make_ex(std::string text, int prec = kPrecAtom, ExKind kind = ExKind::Value);
ExP make_marker(ExKind kind, std::string text = "");
// The operand's text, parenthesised when it binds looser than `min_prec`.
std::string wrap(const ExP& e, int min_prec);
// Rendering of special values where they are used as plain expressions (displays, slices...).
std::string render(const ExP& e);
// Source of a constant as an expression (const tuples keep their repr).
ExP const_ex(const ConstDesc& c);
// A Python string literal for `s` (UTF-8), single-quoted with escapes.
std::string str_literal(const std::string& s);
// Text of a literal piece of an f-string (braces doubled, both quotes escaped).
std::string fstring_literal_piece(const std::string& s);
// f'...' source for an FString (a quote its replacement fields do not use); throws if none.
std::string render_fstring(const Ex& e);
bool is_identifier(const std::string& s);
// The text inside x[...]: `a:b` slices, tuples of slices, or the index expression.
std::string subscript_text(const ExP& idx);
// `not e`, folding double negation and flipping comparisons with a single operator.
ExP negate(const ExP& e);
// BINARY_OP's operator text for its argument ("+", "+=", ...); "" if unknown.
std::string binary_op_text(int arg);
// A comparison a op b; chains `a < b < c` when `b` is the same object ending `left`.
ExP compare_ex(const ExP& left, const std::string& op, const ExP& right);

}  // namespace kiln::decompiler
