// The min-cut rematerialisation choice of what a training graph's forward saves for its backward.
//
// Saving a value costs its bytes for the whole step; recomputing it in the backward costs the
// ops that produce it. Cheap ops (pointwise, views, factories) may be recomputed; matmuls,
// reductions, random ops and anything unknown may not. As a flow network: every forward value
// is an edge (its "in" node to its "out" node) with its size as capacity; a recomputable node's
// inputs feed its outputs with unbounded capacity; primals and constants, which are alive anyway,
// cost nothing; non-recomputable values hang off the source; every value the backward reads
// hangs off the sink. A minimum cut is the cheapest set of values from which the backward can
// recompute everything else it reads.
//
// A pointwise value that a backward operator outside generated code reads (a matmul's operand,
// directly or through views) is not recomputed: the backward would have to write it to memory
// again for that operator (recomputing saves no memory at the backward's peak and adds a kernel
// and an allocation), so it is saved. Views are always free to recompute. No Python, no ATen.
#pragma once
#include <vector>

#include "ir/aten_graph.h"

namespace kiln::autograd {

// Whether lowering may recompute the node in the backward (cheap, deterministic).
bool recomputable(const ir::AtenNode& n);

// Whether the generated code fuses the node with its neighbours (pointwise, views, reductions and
// the normalisations and backward formulas lowered to kernels); other readers of a value need it
// in memory.
bool fusible_reader(const ir::AtenNode& n);

// Per joint value: whether a backward node in `backward_nodes` needs it in memory: read by one
// that is not fusible_reader, or viewed (by views of either graph) by a value that is.
std::vector<bool> materialized_in_backward(const ir::AtenGraph& joint, const std::vector<int>& backward_nodes);

// The forward values (node outputs) to save. `forward[i]`: joint node i belongs to the forward;
// `backward_reads`: the values the backward graph reads that it does not compute itself;
// `materialized`: per value, whether the backward needs it in memory (materialized_in_backward).
std::vector<int> min_cut_saved_values(const ir::AtenGraph& joint, const std::vector<bool>& forward,
                                      const std::vector<int>& backward_reads, int num_primals,
                                      const std::vector<bool>& materialized);

}  // namespace kiln::autograd
