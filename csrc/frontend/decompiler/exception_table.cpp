// Parsing of co_exceptiontable into byte-offset ranges (format: see exception_table.h).
#include "frontend/decompiler/exception_table.h"

#include <stdexcept>

namespace kiln::decompiler {

std::vector<ExceptionEntry> parse_exception_table(const std::vector<uint8_t>& table) {
  std::vector<ExceptionEntry> out;
  size_t pos = 0;
  auto varint = [&]() {
    if (pos >= table.size()) throw std::invalid_argument("truncated exception table");
    uint8_t b = table[pos++];
    int v = b & 63;
    while (b & 64) {
      if (pos >= table.size()) throw std::invalid_argument("truncated exception table");
      b = table[pos++];
      v = (v << 6) | (b & 63);
    }
    return v;
  };
  while (pos < table.size()) {
    ExceptionEntry e;
    int start = varint(), length = varint(), target = varint(), dl = varint();
    e.start = start * 2;
    e.end = (start + length) * 2;
    e.target = target * 2;
    e.depth = dl >> 1;
    e.lasti = dl & 1;
    out.push_back(e);
  }
  return out;
}

}  // namespace kiln::decompiler
