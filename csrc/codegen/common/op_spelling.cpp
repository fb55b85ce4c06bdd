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

}  // namespace kiln::codegen
