// Renders a loop-IR operator through its spelling pattern from the op table (ir/loop_ops.h),
// for every code generator: $0 and $1 become the operands, $T the C++ type of operand 0.
#pragma once
#include <string>

#include "ir/dtype.h"
#include "ir/loop_ops.h"

namespace kiln::codegen {

std::string spell(const char* pattern, const std::string& a, const std::string& b = "", const std::string& type = "");

// The largest (or smallest) value of an integer type (bool: 1 / 0) cast to `type`, the
// generator's temporary type: the identity of max / min reductions.
std::string integer_limit(ir::DType t, bool largest, const std::string& type);

}  // namespace kiln::codegen
