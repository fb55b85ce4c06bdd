// Splitting a joint forward+backward ATen graph into a forward and a backward graph. Two ways to
// choose what the forward saves: kSaveAll (every forward value the backward reads) and kMinCut
// (the cheapest set by bytes from which the backward recomputes the rest with cheap ops; see
// min_cut.h). Recomputed forward nodes are copied to the start of the backward.
//
// The joint graph's inputs are the primals (0..num_primals-1) then the tangents (one per
// differentiable forward output); its outputs are the forward outputs (first num_fwd_outputs)
// then the gradients. A node belongs to the forward when a forward output needs it, else to the
// backward. The backward's inputs are the saved primals, the saved forward values, then the
// tangents; constants go to whichever graph reads them. No Python, no ATen.
#pragma once
#include <string>
#include <vector>

#include "ir/aten_graph.h"

namespace kiln::autograd {

struct JointSplit {
  ir::AtenGraph forward;             // inputs: primals; outputs: forward outputs, then saved values
  ir::AtenGraph backward;            // inputs: saved primals, saved values, tangents; outputs: grads
  std::vector<int> forward_nodes;    // per forward node: its joint node id
  std::vector<int> backward_nodes;   // per backward node: its joint node id (recomputed ones first)
  int num_recomputed = 0;            // forward nodes the backward computes again
  std::vector<int> forward_constants, backward_constants;  // per constant slot: the joint constant index
  std::vector<int> saved_primals;    // primal input indices the backward reads
  int num_saved_values = 0;          // forward outputs past num_fwd_outputs
  std::string describe() const;      // "saved: primals [0, 2], 3 values (f32[4, 8]...)"
};

// Throws std::runtime_error when the joint graph mutates inputs or a forward output is not
// computed by a node (an input returned as is: autograd would need it marked).
enum class Partitioner { kSaveAll, kMinCut };
JointSplit partition_joint(const ir::AtenGraph& joint, int num_primals, int num_fwd_outputs,
                           Partitioner how = Partitioner::kSaveAll);

}  // namespace kiln::autograd
