// Buffer lifetimes: after which step each intermediate buffer is released (DESIGN §3, dead
// buffers and memory). Graph outputs, inputs, constants and mutated-input sources are kept.
#pragma once
#include "ir/loop_ir.h"

namespace kiln::schedule {
void plan_memory(ir::Program& p);
}
