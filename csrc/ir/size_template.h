// One program for every size of a graph's dynamic dimensions (issue 10, item 3).
//
// Lowering decides fusion, loop order, index simplification and memory reuse on concrete sizes.
// Rather than make every one of those decisions symbolic, a program is lowered as today at each
// size it is called with, and its *integers* (extents, sizes, strides, offsets, index
// coefficients and divisors) are separated from everything else its kernels depend on (its
// shape: buffer ids and dtypes, kernels, stages, expressions). Programs of the same graph at
// several sizes whose shapes are equal and whose integers are polynomials of the dynamic sizes
// share one template:
// those polynomials, as `sym::Expr` over symbols s0, s1... (the sizes read from the inputs).
// Kernels generated from the template take the symbols at run time (codegen/cpp), so one kernel
// set serves every size whose own program matches the template at that size, which is checked
// exactly (`matches`): a size where lowering decided the kernels differently, or where an integer
// is not the polynomial, is never run with the shared kernels. The rest of a program (the order
// of kernels and extern calls, frees, memory reuse) is each size's own: it runs as lowered.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/loop_ir.h"
#include "symbolic/sym_expr.h"

namespace kiln::ir {

// An integer of a program: an int64 field, or a floating constant of an expression that holds an
// integer (a mean's or variance's element count).
struct IntField {
  const void* at = nullptr;
  bool is_double = false;
  int64_t value() const { return is_double ? static_cast<int64_t>(*static_cast<const double*>(at)) : *static_cast<const int64_t*>(at); }
};
// A program's size-like integers in a fixed order (pointers into the program, valid while it is
// neither changed nor moved) and everything else, rendered exactly, as `shape`.
struct ProgramInts {
  std::string shape;
  std::vector<IntField> fields;
  std::vector<int64_t> values() const;
};
ProgramInts program_ints(const Program& p);

// c * s0^exps[0] * s1^exps[1] ... + d (c = 0: the constant d).
struct PolyFit {
  int64_t c = 0, d = 0;
  std::vector<int> exps;
  sym::Expr expr() const;
};
// The integer polynomial over symbols that takes value values[j] at symbols[j] for every sample
// j, from a small family (a constant, c*m, c*m + d, m a product of symbols each to a power <= 2);
// nullopt when none fits every sample.
std::optional<PolyFit> fit_poly(const std::vector<std::vector<int64_t>>& symbols, const std::vector<int64_t>& values);
std::optional<sym::Expr> fit_polynomial(const std::vector<std::vector<int64_t>>& symbols, const std::vector<int64_t>& values);

struct SizeTemplate {
  std::string shape;
  std::vector<sym::Expr> ints;  // per integer of ProgramInts
  std::vector<PolyFit> fits;    // the same, as fitted (what the cache file keeps)
  int num_symbols = 0;
  int num_symbolic = 0;         // integers that are not constants
};

// The template as text for the kernel cache (kept beside the kernels, so that a process that
// meets the same program at a size it never saw runs the cached kernels), and back; nullopt for
// text that is not one.
std::string template_text(const SizeTemplate& t);
std::optional<SizeTemplate> parse_template(const std::string& text);

// The template of programs sampled at `symbols[j]` (ints[j] = program_ints(sample j)): every
// sample must have the same shape. nullopt with `why` set when an integer fits no polynomial.
std::optional<SizeTemplate> fit_template(const std::vector<std::vector<int64_t>>& symbols, const std::vector<ProgramInts>& ints,
                                         std::string* why);
// The size symbols of calls whose sizes are `dims[j]` (every size and int of call j, flattened
// in one order for all): the positions whose values differ between the calls, one symbol per
// distinct column (positions that always agree share a symbol), in position order. `enough` is
// set when each symbol takes at least three values (a two-parameter fit is checked by a third).
std::vector<int> symbol_positions(const std::vector<const std::vector<int64_t>*>& dims, bool* enough);
// The symbols' values in a call's sizes: dims[pos[i]] for each symbol i.
std::vector<int64_t> symbol_values(const std::vector<int>& pos, const std::vector<int64_t>& dims);
// The fewest factors of two among the symbols' values (64 for none): CUDA kernels for runtime
// sizes are generated from the sample where this is largest, so that vector accesses over a
// runtime-size stride are generated where it allows them (and serve the sizes that allow them).
int fewest_twos(const std::vector<int64_t>& symbols);
// The note a caller keeps with a template in the cache, saying where its symbols are read from:
// "dims N symbols p0 p1 ..." (N sizes per call, symbol i at position p_i), and back (false for
// text that is not one).
std::string symbols_note(size_t ndims, const std::vector<int>& pos);
bool parse_symbols_note(const std::string& s, std::vector<int>* pos, size_t* ndims);
// Whether `p` (program_ints of a program lowered at `symbols`) is the template at those symbols.
bool matches(const SizeTemplate& t, const ProgramInts& p, const std::vector<int64_t>& symbols, std::string* why);

// How the code generator spells the program's integers that depend on the symbols: C++ over
// `s0`, `s1`... keyed by the field's address in the program `p` (one of the template's samples).
// Fails (nullopt, `why` set) when one field is reached twice with different polynomials.
std::optional<IntSpelling> spell_ints(const SizeTemplate& t, const ProgramInts& p, std::string* why);

}  // namespace kiln::ir
