// Internal to the stack-effect files (stack_effects.cpp, calls.cpp, stores.cpp): the few helpers
// over the symbolic stack that more than one of them uses.
#pragma once
#include <string>
#include <vector>

#include "frontend/decompiler/decompiler_state.h"

namespace kiln::decompiler::stackfx {

// The top of the stack, popped; a DecompileError at instruction i when the stack is empty.
ExP pop(Stack& st, const Decompiler& d, int i);
// An empty display: '(' tuple, '[' list, '{' set, 'd' dict.
ExP display(char kind);
// `obj` as the base of an attribute or subscript (`(1).real`).
std::string attr_base(const ExP& obj);
// `a, b = b, a` from loads, SWAPs and stores at i (stores.cpp); the index to continue at, or -1.
int swap_assignment(Decompiler& d, int i, Stack& st, std::vector<Stmt>& out);

}  // namespace kiln::decompiler::stackfx
