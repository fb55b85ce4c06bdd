// The per-code-object decompiler: decoding (csrc/frontend/bytecode), the exception table, and
// the function body as statements; name lookups for the stack effects.
#include "frontend/decompiler/decompiler_state.h"

#include <cstring>

namespace kiln::decompiler {

Decompiler::Decompiler(const CodeDesc& c)
    : code(c), bc(c.code.data(), c.code.size(), 3, c.py_minor), exc(parse_exception_table(c.exception_table)),
      minor(c.py_minor) {
  cover_.assign(bc.size(), -1);
  skip_.assign(bc.size(), false);
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

// Instructions control can reach from the first one: fall-through, jump targets, and the handlers
// of exception-table ranges that hold a reachable instruction.
std::vector<bool> Decompiler::reachable() const {
  std::vector<bool> seen(bc.size(), false);
  std::vector<int> work{0};
  auto ends_flow = [&](int j) {
    const char* n = bc.at(j).name;
    return is_uncond_jump(j) || !std::strcmp(n, "RETURN_VALUE") || !std::strcmp(n, "RETURN_CONST") ||
           !std::strcmp(n, "RAISE_VARARGS") || !std::strcmp(n, "RERAISE");
  };
  while (!work.empty()) {
    int j = work.back();
    work.pop_back();
    if (j < 0 || j >= bc.size() || seen[j]) continue;
    seen[j] = true;
    if (bc.at(j).target >= 0) work.push_back(bc.at(j).target);
    if (!ends_flow(j)) work.push_back(j + 1);
    if (cover_[j] >= 0) work.push_back(bc.index_of_offset(exc[cover_[j]].target));
  }
  return seen;
}

std::vector<Stmt> Decompiler::body() {
  std::vector<Stmt> out = structured_body();
  return out;
}

std::vector<Stmt> Decompiler::structured_body() {
  Stack st;
  std::vector<Stmt> out;
  RegionCtx ctx;
  // A prologue: straight-line code (no jump, no exception range) ending in a forward jump over
  // code nothing else reaches (kiln's resume functions rebuild the stack and locals, then jump into
  // a copy of the original code): the prologue, then the code from the jump's target.
  int j = 0;
  while (j < bc.size() && bc.at(j).target < 0 && cover_[j] < 0) ++j;
  int lo = 0;
  if (j < bc.size() && is_uncond_jump(j) && cover_[j] < 0 && bc.at(j).target > j + 1) {
    const int t = bc.at(j).target;
    const std::vector<bool> live = reachable();
    bool dead = true;
    for (int k = j + 1; k < t && dead; ++k) dead = !live[k];
    if (dead) {
      if (region(0, j, ctx, st, out) < 0) return out;
      lo = t;
      live_ = live;
    }
  }
  region(lo, bc.size(), ctx, st, out);
  return out;
}

}  // namespace kiln::decompiler
