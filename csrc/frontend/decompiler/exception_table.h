// The 3.11+ exception table (co_exceptiontable): ranges of instructions, each with the handler
// an exception inside it jumps to, the stack depth to unwind to and whether `lasti` is pushed.
// Format (CPython's InternalDocs/exception_handling.md): entries of varint-encoded
// (start, length, target, depth<<1|lasti) in code units, the first varint of an entry marked by
// bit 7 of its first byte; varints are 6 bits a byte, bit 6 meaning "more follows".
#pragma once
#include <cstdint>
#include <vector>

namespace kiln::decompiler {

struct ExceptionEntry {
  int start = 0, end = 0, target = 0;  // byte offsets, end exclusive
  int depth = 0;
  bool lasti = false;
};

std::vector<ExceptionEntry> parse_exception_table(const std::vector<uint8_t>& table);

}  // namespace kiln::decompiler
