// glibc malloc settings; see malloc_tuning.h.
#include "runtime/malloc_tuning.h"

#include <cstdlib>  // defines __GLIBC__ where the C library is glibc

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace kiln::runtime {

bool tune_cpu_malloc() {
#if defined(__GLIBC__)
  static const bool done = [] {
    constexpr int kMmapThreshold = 32 << 20;  // glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit
    return mallopt(M_MMAP_THRESHOLD, kMmapThreshold) == 1 && mallopt(M_TRIM_THRESHOLD, 2 * kMmapThreshold) == 1;
  }();
  return done;
#else
  return false;
#endif
}

}  // namespace kiln::runtime
