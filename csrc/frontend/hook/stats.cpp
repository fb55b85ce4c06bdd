// Storage for kiln.stats() (reset by kiln.reset()).
#include "frontend/hook/stats.h"

#include <chrono>

namespace kiln::frontend {

Stats& stats() {
  static Stats s;
  return s;
}

void reset_stats() { stats() = Stats(); }

double steady_seconds() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

}  // namespace kiln::frontend
