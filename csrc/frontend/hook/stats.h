// Counters and records kiln.stats() and kiln.explain() report.
#pragma once
#include <string>
#include <vector>

namespace kiln::frontend {

struct GraphRecord {
  std::string function, where, code, guards, backend;
  int ops = 0, inputs = 0, guard_count = 0, inlined = 0;
  int meta_hits = 0, meta_misses = 0;
  double capture_s = 0, backend_s = 0;
};

struct BreakRecord {
  std::string function, where, reason, stack;
};

struct Stats {
  long frames_compiled = 0, graphs = 0, graph_breaks = 0, recompiles = 0, guard_failures = 0;
  long cache_hits = 0, cache_misses = 0, eager_runs = 0, recompile_limit_hits = 0, skipped_frames = 0;
  double capture_s = 0, backend_s = 0;
  std::vector<GraphRecord> graph_records;
  std::vector<BreakRecord> breaks;
  std::vector<std::string> recompile_reasons;
};

Stats& stats();
void reset_stats();

}  // namespace kiln::frontend
