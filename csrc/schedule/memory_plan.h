// Buffer lifetimes and reuse (DESIGN §3, dead buffers and memory): after which step each
// intermediate buffer is released (graph outputs, inputs, constants and mutated-input sources
// are kept), and which released buffer's memory a later kernel output takes over.
#pragma once
#include "ir/loop_ir.h"

namespace kiln::schedule {
void plan_memory(ir::Program& p);
}
