// The default partitioner: a joint forward+backward ATen graph in, the forward graph (outputs,
// then saved values) and the backward graph (saved primals, saved values, tangents in) out.
#include <gtest/gtest.h>

#include <algorithm>

#include "autograd/min_cut.h"
#include "autograd/partition.h"

using namespace kiln;

// y = tanh(x @ w) with x: [4, 8], w: [8, 3]; tangent %2 for y; gradient of w only.
static const char* kJoint = R"(%0 = input 0 : f32[4, 8]{8, 1}
%1 = input 1 : f32[8, 3]{3, 1}
%2 = input 2 : f32[4, 3]{3, 1}
%3 = constant 0 : f32[]{}
%4 = aten::mm(%0, mat2=%1) : f32[4, 3]{3, 1}
%5 = aten::tanh(%4) : f32[4, 3]{3, 1}
%6 = aten::tanh_backward(%2, output=%5) : f32[4, 3]{3, 1}
%7 = aten::t(%0) : f32[8, 4]{1, 8}
%8 = aten::mm(%7, mat2=%6) : f32[8, 3]{3, 1}
%9 = aten::mul.Tensor(%8, other=%3) : f32[8, 3]{3, 1}
return %5, %9
)";

TEST(Partition, ForwardSavesWhatTheBackwardReads) {
  ir::AtenGraph joint = ir::AtenGraph::parse(kJoint);
  joint.num_inputs = 3;
  autograd::JointSplit s = autograd::partition_joint(joint, /*num_primals=*/2, /*num_fwd_outputs=*/1);
  EXPECT_EQ(s.forward_nodes, (std::vector<int>{0, 1}));     // mm, tanh
  EXPECT_EQ(s.backward_nodes, (std::vector<int>{2, 3, 4, 5}));
  EXPECT_EQ(s.saved_primals, (std::vector<int>{0}));         // x (for t(x)); w is not read
  EXPECT_EQ(s.num_saved_values, 1);                           // tanh's output
  EXPECT_EQ(s.forward.to_string(), R"(%0 = input 0 : f32[4, 8]{8, 1}
%1 = input 1 : f32[8, 3]{3, 1}
%2 = aten::mm(%0, mat2=%1) : f32[4, 3]{3, 1}
%3 = aten::tanh(%2) : f32[4, 3]{3, 1}
return %3, %3
)");
  EXPECT_EQ(s.backward.to_string(), R"(%0 = input 0 : f32[4, 8]{8, 1}
%1 = input 1 : f32[4, 3]{3, 1}
%2 = input 2 : f32[4, 3]{3, 1}
%6 = constant 0 : f32[]{}
%3 = aten::tanh_backward(%2, output=%1) : f32[4, 3]{3, 1}
%4 = aten::t(%0) : f32[8, 4]{1, 8}
%5 = aten::mm(%4, mat2=%3) : f32[8, 3]{3, 1}
%7 = aten::mul.Tensor(%5, other=%6) : f32[8, 3]{3, 1}
return %7
)");
  EXPECT_EQ(s.backward_constants, (std::vector<int>{0}));
  EXPECT_TRUE(s.forward_constants.empty());
}

TEST(Partition, RefusesInputMutationsAndInputsReturnedAsIs) {
  ir::AtenGraph joint = ir::AtenGraph::parse(kJoint);
  joint.num_inputs = 3;
  ir::AtenGraph mutating = joint;
  mutating.input_mutations.push_back({0, 4});
  EXPECT_THROW(autograd::partition_joint(mutating, 2, 1), std::runtime_error);
  ir::AtenGraph passthrough = joint;
  passthrough.outputs[0] = 0;
  EXPECT_THROW(autograd::partition_joint(passthrough, 2, 1), std::runtime_error);
}

// y = tanh(expand(x @ w)): saving tanh's [8, 4, 3] output costs 8x what saving the matmul's
// [4, 3] output does, and expand and tanh are cheap to recompute; the matmul is not.
static const char* kJointBroadcast = R"(%0 = input 0 : f32[4, 8]{8, 1}
%1 = input 1 : f32[8, 3]{3, 1}
%2 = input 2 : f32[8, 4, 3]{12, 3, 1}
%3 = aten::mm(%0, mat2=%1) : f32[4, 3]{3, 1}
%4 = aten::expand(%3, size=[8, 4, 3], implicit=False) : f32[8, 4, 3]{0, 3, 1}
%5 = aten::tanh(%4) : f32[8, 4, 3]{12, 3, 1}
%6 = aten::tanh_backward(%2, output=%5) : f32[8, 4, 3]{12, 3, 1}
%7 = aten::sum.dim_IntList(%6, dim=[0], keepdim=False, dtype=None) : f32[4, 3]{3, 1}
%8 = aten::t(%0) : f32[8, 4]{1, 8}
%9 = aten::mm(%8, mat2=%7) : f32[8, 3]{3, 1}
return %5, %9
)";

TEST(Partition, MinCutSavesTheSmallerValueAndRecomputesCheapOps) {
  ir::AtenGraph joint = ir::AtenGraph::parse(kJointBroadcast);
  joint.num_inputs = 3;
  autograd::JointSplit all = autograd::partition_joint(joint, 2, 1, autograd::Partitioner::kSaveAll);
  ASSERT_EQ(all.num_saved_values, 1);
  EXPECT_EQ(all.forward.values[all.forward.outputs.back()].meta.sizes, (std::vector<int64_t>{8, 4, 3}));
  autograd::JointSplit cut = autograd::partition_joint(joint, 2, 1, autograd::Partitioner::kMinCut);
  ASSERT_EQ(cut.num_saved_values, 1);
  EXPECT_EQ(cut.forward.values[cut.forward.outputs.back()].meta.sizes, (std::vector<int64_t>{4, 3}));  // the matmul
  EXPECT_EQ(cut.num_recomputed, 2);                                                                     // expand, tanh
  EXPECT_EQ(cut.backward_nodes, (std::vector<int>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(cut.saved_primals, (std::vector<int>{0}));
  EXPECT_NE(cut.describe().find("2 recomputed"), std::string::npos);
}

// As above, but the backward also hands tanh's output (through views) to a matmul: recomputing
// it would write it to memory in the backward anyway, so min-cut saves it and recomputes nothing.
static std::string joint_matmul_reader() {
  std::string text = kJointBroadcast;
  text.erase(text.find("return "));
  return text + R"(%10 = aten::view(%5, size=[32, 3]) : f32[32, 3]{3, 1}
%11 = aten::t(%10) : f32[3, 32]{1, 3}
%12 = aten::view(%2, size=[32, 3]) : f32[32, 3]{3, 1}
%13 = aten::mm(%11, mat2=%12) : f32[3, 3]{3, 1}
return %5, %9, %13
)";
}

TEST(Partition, MinCutSavesAPointwiseValueABackwardMatmulReads) {
  ir::AtenGraph joint = ir::AtenGraph::parse(joint_matmul_reader());
  joint.num_inputs = 3;
  std::vector<bool> mat = autograd::materialized_in_backward(joint, {3, 4, 5, 6, 7, 8, 9, 10});
  EXPECT_TRUE(mat[5]);    // tanh's output, through view and t
  EXPECT_TRUE(mat[11]);   // t's output, the matmul's operand
  EXPECT_FALSE(mat[6]);   // tanh_backward's output: read by a sum
  EXPECT_FALSE(mat[4]);   // the expand: read by tanh only
  autograd::JointSplit cut = autograd::partition_joint(joint, 2, 1, autograd::Partitioner::kMinCut);
  ASSERT_EQ(cut.num_saved_values, 1);
  EXPECT_EQ(cut.forward.values[cut.forward.outputs.back()].meta.sizes, (std::vector<int64_t>{8, 4, 3}));  // tanh's output
  EXPECT_EQ(cut.num_recomputed, 0);
}

// A random node whose result nothing reads still runs in the forward: eager draws its numbers,
// and every later draw depends on it (a training graph's unused dropout changed the next one's).
TEST(Partition, KeepsAnUnusedRandomNodeInTheForward) {
  ir::AtenGraph joint = ir::AtenGraph::parse(R"(%0 = input 0 : f32[4]{1}
%1 = input 1 : f32[4]{1}
%2 = aten::rand_like(%0) : f32[4]{1}
%3 = aten::tanh(%0) : f32[4]{1}
%4 = aten::tanh_backward(%1, output=%3) : f32[4]{1}
return %3, %4
)");
  joint.num_inputs = 2;
  joint.nodes[0].nondeterministic = true;
  for (auto how : {autograd::Partitioner::kSaveAll, autograd::Partitioner::kMinCut}) {
    autograd::JointSplit s = autograd::partition_joint(joint, /*num_primals=*/1, /*num_fwd_outputs=*/1, how);
    EXPECT_EQ(s.forward_nodes, (std::vector<int>{0, 1}));  // rand_like, tanh
    EXPECT_EQ(s.backward_nodes.back(), 2);                  // (min-cut recomputes tanh before it)
    EXPECT_EQ(std::count(s.backward_nodes.begin(), s.backward_nodes.end(), 0), 0);  // never drawn again
  }
}
