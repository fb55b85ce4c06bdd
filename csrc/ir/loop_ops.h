// The operators of the loop IR, as one table: each row names an operator once and says
// everything the rest of the compiler needs about it (its name in the textual IR, its flags,
// how the C++ and the CUDA code generators spell it). Adding an operator is adding a row.
//
// Spellings are patterns: $0 and $1 are the operands (already-computed temporaries), $T is the
// C++ type of operand 0's temporary. `kiln::...` names come from each backend's prefix header
// (codegen/cpp/prefix.h, codegen/cuda/prefix.cuh), which define the same helpers for their
// target, so most rows spell both backends alike.
#pragma once
#include <cstdint>
#include <string>

namespace kiln::ir {

// Flags of a row.
enum OpFlags : uint8_t {
  kOpNone = 0,
  kOpPredicate = 1,      // the result is a bool (comparisons, logical ops, isnan)
  kOpChecked = 2,        // integer forms check the divisor and set the kernel's error flag
  kOpLogicalOnBool = 4,  // on a bool operand it is logical not (bitwise_not of a bool tensor)
  kOpCostly = 8,         // several instructions per element: a correctly rounded division or square
                         // root, a power, an integer division (OpInfo::costly: this or the next)
  kOpTranscendental = 16,  // a library function of tens of instructions (exp, erf, tanh...), which
                           // lowering realizes rather than recompute per broadcast reader (silu and
                           // mish, which call one, are only costly: inlined as they always were)
};

// X(enumerator, textual name, flags, C++ spelling, CUDA spelling)
#define KILN_UNARY_OPS(X)                                                                                                     \
  X(kNeg, "neg", kOpNone, "(-$0)", "(-$0)")                                                                                     \
  X(kAbs, "abs", kOpNone, "(kiln::abs_value($0))", "(kiln::abs_value($0))")                                                     \
  X(kNot, "not", kOpPredicate, "(!$0)", "(!$0)")                                                                                \
  X(kBitNot, "bitnot", kOpLogicalOnBool, "(~$0)", "(~$0)")                                                                      \
  X(kIsNan, "isnan", kOpPredicate, "($0 != $0)", "($0 != $0)")                                                                  \
  X(kIsInf, "isinf", kOpPredicate, "(kiln::m::isinf($0))", "(kiln::m::isinf($0))")                                              \
  X(kRsqrt, "rsqrt", kOpCostly, "($T(1) / kiln::m::sqrt($0))", "($T(1) / kiln::m::sqrt($0))")                                   \
  X(kReciprocal, "reciprocal", kOpCostly, "($T(1) / $0)", "($T(1) / $0)")                                                       \
  X(kSquare, "square", kOpNone, "($0 * $0)", "($0 * $0)")                                                                       \
  X(kIdentity, "identity", kOpNone, "$0", "$0")                                                                                 \
  X(kSilu, "silu", kOpCostly, "($0 * kiln::sigmoid($0))", "($0 * kiln::sigmoid($0))")                                           \
  X(kHardSigmoid, "hardsigmoid", kOpNone, "(kiln::clamp_hi(kiln::clamp_lo($0 / $T(6) + $T(0.5), $T(0)), $T(1)))",              \
    "(kiln::clamp_hi(kiln::clamp_lo($0 / $T(6) + $T(0.5), $T(0)), $T(1)))")                                                     \
  X(kHardSwish, "hardswish", kOpNone, "($0 * kiln::clamp_hi(kiln::clamp_lo($0 + $T(3), $T(0)), $T(6)) / $T(6))",                \
    "($0 * kiln::clamp_hi(kiln::clamp_lo($0 + $T(3), $T(0)), $T(6)) / $T(6))")                                                 \
  X(kMish, "mish", kOpCostly, "($0 * kiln::tanh(kiln::m::log1p(kiln::exp($0))))", "($0 * kiln::tanh(kiln::m::log1p(kiln::exp($0))))") \
  X(kExp, "exp", kOpTranscendental, "kiln::exp($0)", "kiln::exp($0)")                                                           \
  X(kExpVec, "exp_vec", kOpTranscendental, "kiln::exp_vec($0)", "kiln::exp($0)")                                               \
  X(kTanh, "tanh", kOpTranscendental, "kiln::tanh($0)", "kiln::tanh($0)")                                                       \
  X(kSigmoid, "sigmoid", kOpTranscendental, "kiln::sigmoid($0)", "kiln::sigmoid($0)")                                           \
  X(kGelu, "gelu", kOpTranscendental, "kiln::gelu($0)", "kiln::gelu($0)")                                                       \
  X(kGeluTanh, "gelu_tanh", kOpTranscendental, "kiln::gelu_tanh($0)", "kiln::gelu_tanh($0)")                                    \
  X(kGeluGrad, "gelu_grad", kOpTranscendental, "kiln::gelu_grad($0)", "kiln::gelu_grad($0)")                                    \
  X(kGeluTanhGrad, "gelu_tanh_grad", kOpTranscendental, "kiln::gelu_tanh_grad($0)", "kiln::gelu_tanh_grad($0)")                 \
  X(kRelu, "relu", kOpNone, "kiln::relu($0)", "kiln::relu($0)")                                                                 \
  X(kSign, "sign", kOpNone, "kiln::sign($0)", "kiln::sign($0)")                                                                 \
  X(kLog, "log", kOpTranscendental, "kiln::log($0)", "kiln::m::log($0)")                                                        \
  X(kLog2, "log2", kOpTranscendental, "kiln::log2($0)", "kiln::m::log2($0)")                                                    \
  X(kLog10, "log10", kOpTranscendental, "kiln::log10($0)", "kiln::m::log10($0)")                                                \
  X(kLog1p, "log1p", kOpTranscendental, "kiln::log1p($0)", "kiln::m::log1p($0)")                                                \
  X(kExpm1, "expm1", kOpTranscendental, "kiln::m::expm1($0)", "kiln::m::expm1($0)")                                             \
  X(kExp2, "exp2", kOpTranscendental, "kiln::m::exp2($0)", "kiln::m::exp2($0)")                                                 \
  X(kSqrt, "sqrt", kOpCostly, "kiln::sqrt($0)", "kiln::m::sqrt($0)")                                                            \
  X(kSin, "sin", kOpTranscendental, "kiln::m::sin($0)", "kiln::m::sin($0)")                                                     \
  X(kCos, "cos", kOpTranscendental, "kiln::m::cos($0)", "kiln::m::cos($0)")                                                     \
  X(kTan, "tan", kOpTranscendental, "kiln::m::tan($0)", "kiln::m::tan($0)")                                                     \
  X(kAsin, "asin", kOpTranscendental, "kiln::asin($0)", "kiln::m::asin($0)")                                                    \
  X(kAcos, "acos", kOpTranscendental, "kiln::acos($0)", "kiln::m::acos($0)")                                                    \
  X(kAtan, "atan", kOpTranscendental, "kiln::m::atan($0)", "kiln::m::atan($0)")                                                 \
  X(kSinh, "sinh", kOpTranscendental, "kiln::m::sinh($0)", "kiln::m::sinh($0)")                                                 \
  X(kCosh, "cosh", kOpTranscendental, "kiln::m::cosh($0)", "kiln::m::cosh($0)")                                                 \
  X(kErf, "erf", kOpTranscendental, "kiln::m::erf($0)", "kiln::m::erf($0)")                                                     \
  X(kErfc, "erfc", kOpTranscendental, "kiln::m::erfc($0)", "kiln::m::erfc($0)")                                                 \
  X(kFloor, "floor", kOpNone, "kiln::m::floor($0)", "kiln::m::floor($0)")                                                       \
  X(kCeil, "ceil", kOpNone, "kiln::m::ceil($0)", "kiln::m::ceil($0)")                                                           \
  X(kTrunc, "trunc", kOpNone, "kiln::m::trunc($0)", "kiln::m::trunc($0)")                                                       \
  X(kRound, "round", kOpNone, "kiln::m::nearbyint($0)", "kiln::m::nearbyint($0)")                                               \
  X(kRoundBf16, "round_bf16", kOpNone, "kiln::round_bf16($0)", "kiln::round_bf16($0)")                                          \
  X(kRoundF16, "round_f16", kOpNone, "kiln::round_f16($0)", "kiln::round_f16($0)")

#define KILN_BINARY_OPS(X)                                                                                  \
  X(kAdd, "add", kOpNone, "($0 + $1)", "($0 + $1)")                                                           \
  X(kSub, "sub", kOpNone, "($0 - $1)", "($0 - $1)")                                                           \
  X(kMul, "mul", kOpNone, "($0 * $1)", "($0 * $1)")                                                           \
  X(kDiv, "div", kOpCostly, "($0 / $1)", "($0 / $1)")                                                         \
  X(kEq, "eq", kOpPredicate, "($0 == $1)", "($0 == $1)")                                                      \
  X(kNe, "ne", kOpPredicate, "($0 != $1)", "($0 != $1)")                                                      \
  X(kLt, "lt", kOpPredicate, "($0 < $1)", "($0 < $1)")                                                        \
  X(kLe, "le", kOpPredicate, "($0 <= $1)", "($0 <= $1)")                                                      \
  X(kGt, "gt", kOpPredicate, "($0 > $1)", "($0 > $1)")                                                        \
  X(kGe, "ge", kOpPredicate, "($0 >= $1)", "($0 >= $1)")                                                      \
  X(kAnd, "and", kOpPredicate, "($0 && $1)", "($0 && $1)")                                                    \
  X(kOr, "or", kOpPredicate, "($0 || $1)", "($0 || $1)")                                                      \
  X(kXor, "xor", kOpPredicate, "(($0 != 0) != ($1 != 0))", "(($0 != 0) != ($1 != 0))")                        \
  X(kBitAnd, "bitand", kOpNone, "($0 & $1)", "($0 & $1)")                                                     \
  X(kBitOr, "bitor", kOpNone, "($0 | $1)", "($0 | $1)")                                                       \
  X(kBitXor, "bitxor", kOpNone, "($0 ^ $1)", "($0 ^ $1)")                                                     \
  X(kMax, "max", kOpNone, "kiln::maxnan($0, $1)", "kiln::maxnan($0, $1)")                                     \
  X(kMin, "min", kOpNone, "kiln::minnan($0, $1)", "kiln::minnan($0, $1)")                                     \
  X(kFMax, "fmax", kOpNone, "kiln::fmaxv($0, $1)", "kiln::fmaxv($0, $1)")                                     \
  X(kFMin, "fmin", kOpNone, "kiln::fminv($0, $1)", "kiln::fminv($0, $1)")                                     \
  X(kPow, "pow", kOpCostly, "kiln::powv($0, $1)", "kiln::powv($0, $1)")                                       \
  X(kFloorDiv, "floordiv", kOpChecked | kOpCostly, "kiln::floordiv($0, $1, kiln_err)", "kiln::floordiv($0, $1, kiln_err)") \
  X(kTruncDiv, "truncdiv", kOpChecked | kOpCostly, "kiln::truncdiv($0, $1, kiln_err)", "kiln::truncdiv($0, $1, kiln_err)") \
  X(kRemainder, "remainder", kOpChecked | kOpCostly, "kiln::remainder($0, $1, kiln_err)", "kiln::remainder($0, $1, kiln_err)") \
  X(kFMod, "fmod", kOpChecked | kOpCostly, "kiln::fmodv($0, $1, kiln_err)", "kiln::fmodv($0, $1, kiln_err)")  \
  X(kAtan2, "atan2", kOpCostly, "kiln::m::atan2($0, $1)", "kiln::m::atan2($0, $1)")                           \
  X(kClampLo, "clamp_lo", kOpNone, "kiln::clamp_lo($0, $1)", "kiln::clamp_lo($0, $1)")                        \
  X(kClampHi, "clamp_hi", kOpNone, "kiln::clamp_hi($0, $1)", "kiln::clamp_hi($0, $1)")

// Reductions. X(enumerator, textual name, parts, identity, flags, combine spelling): `parts` is how
// many values the result has (welford: mean and m2; argmax: value and position); `identity`
// starts an accumulator; `combine` folds $1 into $0 (the same for both backends, whose prefix
// headers define the helpers). welford and argmax/argmin fold through their own helpers.
enum class ReduceIdentity : uint8_t { kZero, kOne, kLowest, kHighest, kNone };
#define KILN_REDUCE_OPS(X)                                                         \
  X(kSum, "sum", 1, ReduceIdentity::kZero, kOpNone, "$0 + $1")                     \
  X(kProd, "prod", 1, ReduceIdentity::kOne, kOpNone, "$0 * $1")                    \
  X(kMax, "max", 1, ReduceIdentity::kLowest, kOpNone, "kiln::maxnan($0, $1)")      \
  X(kMin, "min", 1, ReduceIdentity::kHighest, kOpNone, "kiln::minnan($0, $1)")     \
  X(kAny, "any", 1, ReduceIdentity::kZero, kOpNone, "($0 || $1)")                  \
  X(kAll, "all", 1, ReduceIdentity::kOne, kOpNone, "($0 && $1)")                   \
  X(kWelford, "welford", 2, ReduceIdentity::kNone, kOpNone, "")                    \
  X(kArgMax, "argmax", 2, ReduceIdentity::kNone, kOpNone, "")                      \
  X(kArgMin, "argmin", 2, ReduceIdentity::kNone, kOpNone, "")

#define KILN_OP_ENUMERATOR(e, ...) e,
enum class UnaryOp : uint8_t { KILN_UNARY_OPS(KILN_OP_ENUMERATOR) };
enum class BinaryOp : uint8_t { KILN_BINARY_OPS(KILN_OP_ENUMERATOR) };
enum class ReduceOp : uint8_t { KILN_REDUCE_OPS(KILN_OP_ENUMERATOR) };
#undef KILN_OP_ENUMERATOR

struct OpInfo {
  const char* name;  // textual IR
  uint8_t flags;     // OpFlags
  const char* cpp;   // codegen/cpp spelling
  const char* cuda;  // codegen/cuda spelling
  bool is(OpFlags f) const { return (flags & f) != 0; }
  bool costly() const { return (flags & (kOpCostly | kOpTranscendental)) != 0; }
};
struct ReduceInfo {
  const char* name;
  int parts;
  ReduceIdentity identity;
  uint8_t flags;
  const char* combine;
};

const OpInfo& info(UnaryOp op);
const OpInfo& info(BinaryOp op);
const ReduceInfo& info(ReduceOp op);
inline const char* op_name(UnaryOp op) { return info(op).name; }
inline const char* op_name(BinaryOp op) { return info(op).name; }
inline const char* op_name(ReduceOp op) { return info(op).name; }
// By textual name (tools and tests that read the textual IR); false if there is no such op.
bool unary_op_named(const std::string& name, UnaryOp* out);
bool binary_op_named(const std::string& name, BinaryOp* out);
bool reduce_op_named(const std::string& name, ReduceOp* out);

}  // namespace kiln::ir
