// The min-cut rematerialisation choice of what a training graph's forward saves for its backward.
//
// Saving a value costs its bytes for the whole step; recomputing it in the backward costs the
// ops that produce it. Cheap ops (pointwise, views, factories) may be recomputed; matmuls,
// reductions, random ops and anything unknown may not. As a flow network: every forward value
// is an edge (its "in" node to its "out" node) with its size as capacity; a recomputable node's
// inputs feed its outputs with unbounded capacity; primals and constants, which are alive anyway,
// cost nothing; non-recomputable values hang off the source; every value the backward reads
// hangs off the sink. A minimum cut is the cheapest set of values from which the backward can
// recompute everything else it reads. No Python, no ATen.
#pragma once
#include <vector>

#include "ir/aten_graph.h"

namespace kiln::autograd {

// Whether lowering may recompute the node in the backward (cheap, deterministic).
bool recomputable(const ir::AtenNode& n);

// The forward values (node outputs) to save. `forward[i]`: joint node i belongs to the forward;
// `backward_reads`: the values the backward graph reads that it does not compute itself.
std::vector<int> min_cut_saved_values(const ir::AtenGraph& joint, const std::vector<bool>& forward,
                                      const std::vector<int>& backward_reads, int num_primals);

}  // namespace kiln::autograd
