// Process-wide knobs the C++ side reads. Their single source of truth is the typed options
// registry in kiln/_options.py, which pushes values here; C++ never reads the environment.
#pragma once
#include <string>

namespace kiln::frontend {

enum LogChannel : unsigned {
  kLogGraphBreaks = 1u << 0,
  kLogRecompiles = 1u << 1,
  kLogGuards = 1u << 2,
  kLogGraphCode = 1u << 3,
  kLogPerf = 1u << 4,
  kLogDynamic = 1u << 5,  // symbolic sizes: dimensions made dynamic, shape guards and who added them
};

struct Options {
  unsigned log_mask = 0;
  bool memoize_meta = true;
  int max_inline_depth = 48;
};

Options& options();
// Sends a message to the Python log callback if the channel is enabled.
void log(LogChannel channel, const std::string& message);
void set_log_callback(void* py_callable);  // a PyObject*, kept alive by the callee

}  // namespace kiln::frontend
