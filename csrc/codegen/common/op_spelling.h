// Renders a loop-IR operator through its spelling pattern from the op table (ir/loop_ops.h),
// for every code generator: $0 and $1 become the operands, $T the C++ type of operand 0.
#pragma once
#include <string>

#include "ir/loop_ops.h"

namespace kiln::codegen {

std::string spell(const char* pattern, const std::string& a, const std::string& b = "", const std::string& type = "");

}  // namespace kiln::codegen
