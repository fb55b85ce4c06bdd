// Graph breaks: splitting a frame at an instruction kiln cannot capture.
//
// The frontend captures the frame up to the instruction (the graph), runs the instruction
// itself eagerly on the real values, and continues in a generated resume function: a copy of
// the frame's code with a prologue that reloads the live stack and locals and jumps to the next
// instruction. The resume function is an ordinary Python function, so its frame is offered to
// kiln like any other and gets its own graphs. See docs in frontend_internals.md §4.
#pragma once
#include <string>

#include "frontend/interpreter/interpreter.h"

namespace kiln::frontend {

// Why the frame cannot be split before its instruction `index` ("" when it can): closures and
// cells (their slots would move), a break inside a loop (the frame runs eagerly instead, as
// Dynamo does) or inside a try/with block, or an instruction other than CALL, STORE_ATTR or a branch.
std::string break_refusal(PyCodeObject* code, int index);

// Runs a break's instruction on the frame's state (the tuple its graph produced) and then the
// resume function (closed over `func`'s closure); returns the frame's result (new reference) or
// null with an exception set.
PyObject* continue_after_break(const BreakState& brk, PyCodeObject* code, PyObject* globals, PyObject* func, PyObject* state);

}  // namespace kiln::frontend
