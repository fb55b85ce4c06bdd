// Pattern substitution for operator spellings; see op_spelling.h.
#include "codegen/common/op_spelling.h"

namespace kiln::codegen {

std::string spell(const char* pattern, const std::string& a, const std::string& b, const std::string& type) {
  std::string out;
  for (const char* p = pattern; *p; ++p) {
    if (*p != '$' || !p[1]) {
      out += *p;
      continue;
    }
    ++p;
    if (*p == '0') out += a;
    else if (*p == '1') out += b;
    else if (*p == 'T') out += type;
    else out += '$', out += *p;
  }
  return out;
}

std::string integer_limit(ir::DType t, bool largest, const std::string& type) {
  using ir::DType;
  const char* v;
  switch (t) {
    case DType::kBool: v = largest ? "1" : "0"; break;
    case DType::kUInt8: v = largest ? "255" : "0"; break;
    case DType::kInt8: v = largest ? "127" : "-128"; break;
    case DType::kInt16: v = largest ? "32767" : "-32768"; break;
    case DType::kInt32: v = largest ? "2147483647" : "(-2147483647 - 1)"; break;
    default: v = largest ? "9223372036854775807LL" : "(-9223372036854775807LL - 1)"; break;
  }
  return "static_cast<" + type + ">(" + v + ")";
}

}  // namespace kiln::codegen
