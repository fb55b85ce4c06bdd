// Storage for kiln.stats() (reset by kiln.reset()).
#include "frontend/hook/stats.h"

namespace kiln::frontend {

Stats& stats() {
  static Stats s;
  return s;
}

void reset_stats() { stats() = Stats(); }

}  // namespace kiln::frontend
