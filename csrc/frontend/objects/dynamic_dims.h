// Which tensor dimensions a capture makes symbolic (torch.compile's `dynamic=` policies).
//
// Automatic (dynamic=None): capture static first; remember each tensor input's sizes per code
// object; when a later capture sees a dimension with another size, that dimension becomes
// symbolic from then on, so a growing cache or a new sequence length costs one recompile, not one
// per size. dynamic=True: every dimension symbolic from the start; dynamic=False: never.
// Marks on the tensor (`torch._dynamo.mark_dynamic` / `kiln.mark_dynamic` set
// `_dynamo_dynamic_indices`; `mark_static` sets `_dynamo_static_indices`) win over the policy.
// Sizes 0 and 1 always specialise (as in Dynamo): broadcasting and empty tensors behave differently.
#pragma once
#include <Python.h>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiln::frontend {

enum class DynamicPolicy { kAutomatic, kStatic, kAll };

struct SizeHistory {
  struct Entry {
    std::vector<int64_t> sizes;  // at the last capture
    uint64_t dynamic = 0;        // dimensions seen to change
    bool pinned = false;         // a float argument the capture used as a Python value (a
                                 // branch, int()): specialised from then on
  };
  std::unordered_map<std::string, Entry> by_source;
};

// Bit mask of t's dimensions to make symbolic; updates `history` (may be null). `changes` gets a
// readable note per dimension that just became dynamic ("L['x'] dim 1: 64 -> 72").
uint64_t choose_dynamic_dims(PyObject* t, const std::string& source, const std::vector<int64_t>& sizes,
                             DynamicPolicy policy, SizeHistory* history, std::vector<std::string>* changes);

// Whether an int argument of the frame (`t` handed to a resume function, a length passed in) is
// symbolic: under automatic dynamic once it was seen with another value, or always with dynamic=True.
// 0 and 1 always specialise.
bool choose_dynamic_int(const std::string& source, int64_t value, DynamicPolicy policy, SizeHistory* history,
                        std::vector<std::string>* changes);

// Whether a float argument of the frame (a temperature, a learning rate, a mixing weight) is a
// graph input rather than a constant: under automatic dynamic once it was seen with another value
// (torch.compile's automatic dynamic floats), always with dynamic=True; never once pinned.
bool choose_dynamic_float(const std::string& source, double value, DynamicPolicy policy, SizeHistory* history,
                          std::vector<std::string>* changes);
// A dynamic float the capture had to specialise: later captures keep it a constant.
void pin_float(const std::string& source, SizeHistory* history);

}  // namespace kiln::frontend
