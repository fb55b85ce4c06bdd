// prune_absent_tangents: a backward graph and which tangents are given in, the backward that
// treats the absent ones as structural zeros out.
#include <gtest/gtest.h>

#include "autograd/absent_tangents.h"

using namespace kiln;

// a = exp(h), b = (h * 2).sum() with h = x @ w: the gradient of w from tangent %2 (for a, through
// exp's saved result %0) and tangent %3 (for b).
static const char* kBackward = R"(%0 = input 0 : f32[4, 5]{5, 1}
%1 = input 1 : f32[4, 3]{3, 1}
%2 = input 2 : f32[4, 5]{5, 1}
%3 = input 3 : f32[]{}
%4 = aten::mul.Tensor(%2, other=%0) : f32[4, 5]{5, 1}
%5 = aten::expand(%3, size=[4, 5], implicit=False) : f32[4, 5]{0, 0}
%6 = aten::mul.Scalar(%5, other=2) : f32[4, 5]{5, 1}
%7 = aten::add.Tensor(%4, other=%6, alpha=1) : f32[4, 5]{5, 1}
%8 = aten::t(%1) : f32[3, 4]{1, 3}
%9 = aten::mm(%8, mat2=%7) : f32[3, 5]{5, 1}
return %9
)";

static autograd::PrunedBackward prune(std::vector<bool> present) {
  ir::AtenGraph g = ir::AtenGraph::parse(kBackward);
  g.num_inputs = 4;
  return autograd::prune_absent_tangents(g, /*first_tangent=*/2, present);
}

TEST(AbsentTangents, AllGivenKeepsTheGraph) {
  autograd::PrunedBackward p = prune({true, true});
  ir::AtenGraph g = ir::AtenGraph::parse(kBackward);
  EXPECT_EQ(p.graph.to_string(), g.to_string());
  EXPECT_EQ(p.origin, (std::vector<int>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(p.zero_output, (std::vector<bool>{false}));
}

// The unused output's formula (exp's backward: tangent * saved) is not run: with the saved
// value inf it would put NaN into the gradient. The sum it fed gets zeros in its place.
TEST(AbsentTangents, AnUnusedOutputsFormulaIsNotRun) {
  autograd::PrunedBackward p = prune({false, true});
  EXPECT_EQ(p.graph.to_string(), R"(%0 = input 0 : f32[4, 5]{5, 1}
%1 = input 1 : f32[4, 3]{3, 1}
%2 = input 2 : f32[4, 5]{5, 1}
%3 = input 3 : f32[]{}
%4 = aten::expand(%3, size=[4, 5], implicit=False) : f32[4, 5]{0, 0}
%5 = aten::mul.Scalar(%4, other=2) : f32[4, 5]{5, 1}
%6 = aten::zeros([4, 5], dtype=f32, layout=None, device=None, pin_memory=None) : f32[4, 5]{5, 1}
%7 = aten::add.Tensor(%6, other=%5, alpha=1) : f32[4, 5]{5, 1}
%8 = aten::t(%1) : f32[3, 4]{1, 3}
%9 = aten::mm(%8, mat2=%7) : f32[3, 5]{5, 1}
return %9
)");
  EXPECT_EQ(p.origin, (std::vector<int>{1, 2, -1, 3, 4, 5}));
}

// The other way round, expand and mul.Scalar of a zero are zero too.
TEST(AbsentTangents, ZerosFlowThroughLinearOperators) {
  autograd::PrunedBackward p = prune({true, false});
  EXPECT_EQ(p.origin, (std::vector<int>{0, -1, 3, 4, 5}));
  EXPECT_NE(p.graph.to_string().find("aten::add.Tensor(%4, other=%5"), std::string::npos) << p.graph.to_string();
}

// No tangent: the gradient is structurally zero and leaves the outputs; nothing runs.
TEST(AbsentTangents, NoTangentNoGradient) {
  autograd::PrunedBackward p = prune({false, false});
  EXPECT_TRUE(p.graph.nodes.empty());
  EXPECT_TRUE(p.graph.outputs.empty());
  EXPECT_EQ(p.zero_output, (std::vector<bool>{true}));
}

// An operator not known to map zero to zero (exp(0) is 1) gets a real zero tensor.
TEST(AbsentTangents, UnknownOperatorsSeeRealZeros) {
  ir::AtenGraph g = ir::AtenGraph::parse(R"(%0 = input 0 : f32[4]{1}
%1 = aten::exp(%0) : f32[4]{1}
return %1
)");
  g.num_inputs = 1;
  autograd::PrunedBackward p = autograd::prune_absent_tangents(g, 0, {false});
  EXPECT_EQ(p.origin, (std::vector<int>{-1, 0}));
  EXPECT_EQ(p.zero_output, (std::vector<bool>{false}));
}

// std's backward over one element: masked_fill(grad * ..., std == 0, 0) then a product with
// 1 / (N - 1) = inf. With the tangent absent the masked fill of zero is zero (it was materialised
// before the fill, and zeros * inf is NaN: the used output's gradient became NaN).
TEST(AbsentTangents, MaskedFillOfZeroWithZeroStaysZero) {
  ir::AtenGraph g = ir::AtenGraph::parse(R"(%0 = input 0 : f32[3]{1}
%1 = input 1 : f32[3]{1}
%2 = input 2 : f32[3]{1}
%3 = aten::eq.Scalar(%0, other=0) : b8[3]{1}
%4 = aten::div.Tensor(%2, other=%0) : f32[3]{1}
%5 = aten::masked_fill.Scalar(%4, mask=%3, value=0) : f32[3]{1}
%6 = aten::mul.Scalar(%5, other=inf) : f32[3]{1}
%7 = aten::add.Tensor(%6, other=%1, alpha=1) : f32[3]{1}
return %7
)");
  g.num_inputs = 3;
  autograd::PrunedBackward p = autograd::prune_absent_tangents(g, /*first_tangent=*/1, {true, false});
  const std::string text = p.graph.to_string();
  EXPECT_EQ(text.find("aten::div"), std::string::npos) << text;
  EXPECT_EQ(text.find("aten::mul.Scalar"), std::string::npos) << text;  // the zero meets no inf
  EXPECT_NE(text.find("%3 = aten::zeros([3]"), std::string::npos) << text;  // materialised at the add
}

// clamp's backward selects between the gradient and scalar_tensor(0.): no rule on the operators
// makes that selection zero, but it is the formula of an autograd node (grad_fn 0) none of whose
// gradients is given, which eager does not run. std's backward (grad_fn 1) reads only its result:
// it is not run either, so its product with 1 / (N - 1) = inf never meets a materialised zero.
// The forward-only operator inside the formula (the mask) stays what it was.
TEST(AbsentTangents, AnAutogradNodeWithNoGivenGradientIsNotRun) {
  ir::AtenGraph g = ir::AtenGraph::parse(R"(%0 = input 0 : f32[3]{1}
%1 = input 1 : f32[3]{1}
%2 = input 2 : f32[3]{1}
%3 = aten::ge.Scalar(%0, other=0) : b8[3]{1} in grad_fn 0
%4 = aten::scalar_tensor(0., dtype=f32, layout=None, device=None, pin_memory=None) : f32[]{} in grad_fn 0
%5 = aten::where.self(%3, self=%2, other=%4) : f32[3]{1} in grad_fn 0
%6 = aten::mul.Scalar(%5, other=inf) : f32[3]{1} in grad_fn 1
%7 = aten::add.Tensor(%6, other=%1, alpha=1) : f32[3]{1}
return %7
)");
  g.num_inputs = 3;
  EXPECT_EQ(g.nodes[2].grad_fn, 0);
  EXPECT_EQ(ir::AtenGraph::parse(g.to_string()).to_string(), g.to_string());  // the text keeps grad_fn
  autograd::PrunedBackward p = autograd::prune_absent_tangents(g, /*first_tangent=*/1, {true, false});
  const std::string text = p.graph.to_string();
  EXPECT_EQ(text.find("aten::where"), std::string::npos) << text;
  EXPECT_EQ(text.find("aten::mul.Scalar"), std::string::npos) << text;
  EXPECT_NE(text.find("aten::add.Tensor(%3, other=%1"), std::string::npos) << text;
  // Both tangents given: every operator runs.
  EXPECT_EQ(autograd::prune_absent_tangents(g, 1, {true, true}).graph.nodes.size(), 5u);
}
