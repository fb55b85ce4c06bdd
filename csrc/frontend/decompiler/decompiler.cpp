// The per-code-object decompiler: decoding (csrc/frontend/bytecode), the exception table, and
// the function body as statements; name lookups for the stack effects.
#include "frontend/decompiler/decompiler_state.h"

namespace kiln::decompiler {

Decompiler::Decompiler(const CodeDesc& c)
    : code(c), bc(c.code.data(), c.code.size(), 3, c.py_minor), exc(parse_exception_table(c.exception_table)),
      minor(c.py_minor) {
  cover_.assign(bc.size(), -1);
  for (size_t k = 0; k < exc.size(); ++k) {
    int a = bc.index_of_offset(exc[k].start);
    for (int j = a; j >= 0 && j < bc.size() && bc.at(j).offset < exc[k].end; ++j) cover_[j] = static_cast<int>(k);
  }
}

void Decompiler::fail(const std::string& what, int index) const {
  throw DecompileError("cannot decompile " + what + " in " + code.qualname, offset(index));
}

const std::string& Decompiler::name(int i) const {
  if (i < 0 || i >= static_cast<int>(code.names.size())) fail("name index out of range", 0);
  return code.names[i];
}

std::string Decompiler::local(int i) const {
  if (i < 0 || i >= static_cast<int>(code.localsplus.size())) fail("local index out of range", 0);
  return code.localsplus[i];
}

std::vector<Stmt> Decompiler::body() {
  if (code.flags & (kCoCoroutine | kCoAsyncGenerator)) fail("async function", 0);
  Stack st;
  std::vector<Stmt> out;
  RegionCtx ctx;
  region(0, bc.size(), ctx, st, out);
  return out;
}

}  // namespace kiln::decompiler
