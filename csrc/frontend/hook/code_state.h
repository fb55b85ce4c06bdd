// Per-code-object cache state, stored in the code object's co_extra slot: a most-recently-used
// list of entries (guards + how to produce the frame's result), and whether the code is skipped.
#pragma once
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "frontend/guards/guards.h"
#include "frontend/interpreter/interpreter.h"

namespace kiln::frontend {

struct CacheEntry {
  int context_id = -1;
  std::shared_ptr<GuardTree> guards;
  std::vector<SourcePtr> inputs;
  // How a hit gathers the inputs: every source on their paths once, parents first
  // (fetch_parent[i] is an earlier index, or -1 for a source read from the frame), and the
  // plan index of each input.
  std::vector<SourcePtr> fetch_plan;
  std::vector<int> fetch_parent;
  std::vector<int> input_slots;
  std::vector<SourcePtr> made;  // objects made anew before every run (Source::kMade), by index
  std::vector<int> numpy_inputs;  // positions in `inputs` of numpy arrays: passed as torch.from_numpy(array)
  std::vector<int> float_inputs;  // positions in `inputs` of dynamic floats: passed as 0-d float64 tensors
  int shared_objects = 0;       // OutputTemplate::shared slots of a run's rebuilt objects
  PyRef compiled;          // callable(*inputs) -> sequence of outputs; null: run the frame eagerly
  OutputTemplate output;
  std::vector<SideEffect> side_effects;
  std::string reason;      // why the frame runs eagerly (fallback entries)
  bool mutates_inputs = false;  // the graph writes tensors the frame was given (see run_or_pass)
  std::vector<std::pair<int, bool>> assertions;  // Capture::assertions
  int inference_run = -1, pop_inference_after = 0;  // Capture::inference_run, pop_inference_after
  bool grad_at_start = true;
  bool enters_autocast = false;  // the graph enters torch.autocast blocks (Capture::enters_autocast)
  // A graph break: `output` builds the frame's state at the break, from which the break's
  // instruction and the resume function continue (see graph_break.h).
  std::shared_ptr<BreakState> brk;
  PyCodeObject* code = nullptr;  // borrowed: the code object owns this entry
  PyRef globals;
};

struct CodeState {
  bool skip = false;        // library code kiln never captures
  bool skip_decided = false;
  std::list<std::shared_ptr<CacheEntry>> entries;
  bool limit_warned = false;
  // Compile contexts (kiln.compile calls) for which this code hit the recompile limit: a miss
  // for them runs the frame eagerly at once, without looking for a reason or a lock.
  std::vector<int> limit_hit;
  // Per compile context: recompiles caused by a tensor's sizes/layout or by a new object where an
  // identity was guarded. Those change on every call in real programs (growing caches, per-call
  // outputs); past a small budget the frame runs eagerly rather than recompile each time.
  std::vector<std::pair<int, int>> volatile_recompiles;
  int count_volatile(int context) {
    for (auto& [c, n] : volatile_recompiles)
      if (c == context) return ++n;
    volatile_recompiles.emplace_back(context, 1);
    return 1;
  }
  SizeHistory size_history;  // tensor input sizes per source, for automatic dynamic shapes
  bool hit_limit(int context) const {
    for (int c : limit_hit)
      if (c == context) return true;
    return false;
  }
};

// The state of a code object, created on first use (nullptr on failure, no exception set).
CodeState* code_state(PyCodeObject* code);
bool init_code_state();
// Forget every entry of every code object (kiln.reset()).
void clear_all_code_states();

}  // namespace kiln::frontend
