// glibc malloc settings for processes that run compiled CPU graphs.
//
// glibc returns a free top of the heap to the OS once it passes the trim threshold, and serves
// requests above the mmap threshold with fresh mappings. Both thresholds start low (256 KB,
// 128 KB) and only rise as the process frees large mmapped blocks, so whether a process ever
// reaches its steady state is luck of its allocation history. Where it does not, every call of
// a graph that frees a few MB at the heap's top gets those pages back from the OS and faults
// them in again, zeroed: measured on the bench's hf_bert (4 layers, 2 threads) as 992 page faults
// a call (eager's order of frees: 5-13), about a tenth of the call. Setting the thresholds to the
// values glibc's own adjustment stops at (mmap 32 MB, trim twice that) makes the steady state
// certain; the cost is up to 64 MB of freed heap kept by the process instead of returned.
#pragma once

namespace kiln::runtime {

// Applies the settings once per process (later calls do nothing); false where the C library is
// not glibc or refused them.
bool tune_cpu_malloc();

}  // namespace kiln::runtime
