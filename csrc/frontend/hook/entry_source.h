// The debug dump's transformed.py: a cache entry's steps (run_entry in frame_dispatch.cpp) as
// Python source, for readers; nothing runs it.
#pragma once
#include <string>

#include "frontend/interpreter/interpreter.h"

namespace kiln::frontend {

// A source as the Python expression that reaches its value from the frame (`self.fc.weight`).
std::string source_python(const SourcePtr& s);
// An output template as the Python expression that builds it (`__graph_out[0]` for a graph output).
std::string template_python(const OutputTemplate& t);
// The entry of `cap` for the frame of `code` as a Python function.
std::string entry_python(const Capture& cap, PyCodeObject* code);

}  // namespace kiln::frontend
