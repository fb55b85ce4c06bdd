// Counters and records kiln.stats() and kiln.explain() report.
#pragma once
#include <string>
#include <vector>

namespace kiln::frontend {

struct GraphRecord {
  std::string function, where, code, guards, backend;
  std::string break_reason, break_where;  // the graph break that ends this graph, if any
  std::string recompile_reason;           // the guard failure that made this entry, if any
  int ops = 0, inputs = 0, guard_count = 0, inlined = 0;
  int meta_hits = 0, meta_misses = 0;
  double started_s = 0;                   // when the capture began, on steady_seconds()'s clock
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
  std::vector<std::string> recompile_stacks;  // per recompile: the user's call stack, outermost first
};

Stats& stats();
// Seconds on the monotonic clock the records use (the one Python's time.perf_counter reads on Linux).
double steady_seconds();
void reset_stats();

}  // namespace kiln::frontend
