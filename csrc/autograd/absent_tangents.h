// The backward of a training graph for a call where some outputs got no gradient (autograd hands
// the node None for an output the loss does not use).
//
// The backward graph was traced with a tangent for every differentiable output. Feeding zeros
// for the absent ones is what AOTAutograd does, and it is wrong in floating point: an unused
// output's formula still runs, and 0 * inf (fmod's `trunc(a / b)` where b is 0) puts NaN into
// the gradient of an input the used outputs reach. Eager never runs that formula. This pass
// marks absent tangents as structural zeros and propagates them through the operators that are
// linear in that argument (views, mul, mm, the `*_backward` operators in their gradient
// argument, ...): those nodes vanish. Where a zero meets a node that is not known to map zero
// to zero (add with a live operand, cat, an unknown operator), the zero is materialised as an
// `aten::zeros` node of the value's dtype and sizes at that point, after every product that
// could have turned it into NaN. Gradients that end up zero are dropped from the outputs.
//
// Above the operators, autograd's own rule: a node none of whose gradients is defined is not run
// (its results are None). Each backward operator names the autograd node whose formula recorded
// it (AtenNode::grad_fn); when nothing that node's operators read depends on a given tangent,
// every operator of it that reads a gradient is zero, whatever it computes (clamp's backward
// selects between the gradient and scalar_tensor(0.): a selection this pass cannot call zero
// from its operands alone).
// No Python, no ATen.
#pragma once
#include <vector>

#include "ir/aten_graph.h"

namespace kiln::autograd {

struct PrunedBackward {
  ir::AtenGraph graph;               // same inputs and constants; outputs: the non-zero gradients
  std::vector<int> origin;           // per node: the backward graph's node it copies, -1 = inserted aten::zeros
  std::vector<bool> zero_output;     // per backward output: structurally zero (no gradient)
};

// `present[k]`: whether tangent k (graph input first_tangent + k) is given.
PrunedBackward prune_absent_tangents(const ir::AtenGraph& backward, int first_tangent, const std::vector<bool>& present);

}  // namespace kiln::autograd
