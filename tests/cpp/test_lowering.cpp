// Lowering, scheduling and memory planning, IR in, IR out: each test writes an ATen graph as
// text, lowers it, and checks the loop-IR program (kernels, stages, externs, frees, reuse).
#include <gtest/gtest.h>

#include <stdexcept>

#include "ir/aten_graph.h"
#include "lowering/lowerer.h"
#include "schedule/memory_plan.h"
#include "schedule/placement.h"

using namespace kiln;

namespace {

ir::Program lower(const std::string& text, bool fuse = true) {
  lowering::LoweringOptions o;
  o.fuse = fuse;
  ir::AtenGraph g = ir::AtenGraph::parse(text);
  ir::Program p = lowering::Lowerer(g, o).run();
  schedule::plan_memory(p);
  return p;
}

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

int externs(const ir::Program& p) {
  int n = 0;
  for (const auto& s : p.steps) n += s.kind == ir::Step::kExtern;
  return n;
}

const char* kPointwiseLN = R"(%0 = input 0 : f32[4, 16]{16, 1}
%1 = input 1 : f32[16]{1}
%2 = aten::mul.Tensor(%0, other=%1) : f32[4, 16]{16, 1}
%3 = aten::gelu(%2, approximate='none') : f32[4, 16]{16, 1}
%4 = aten::add.Tensor(%3, other=%0, alpha=1) : f32[4, 16]{16, 1}
%5, %6, %7 = aten::native_layer_norm(%4, normalized_shape=[16], weight=None, bias=None, eps=1e-05) : f32[4, 16]{16, 1}, f32[4, 1]{1, 1}, f32[4, 1]{1, 1}
return %5
)";

}  // namespace

TEST(AtenGraphText, RoundTrips) {
  const std::string text = std::string(kPointwiseLN) + "mutates input 0 := %4\n";
  EXPECT_EQ(ir::AtenGraph::parse(text).to_string(), text);
  const std::string lists = R"(%0 = input 0 : i64[2, 3]{1, 2}+4
%1 = constant 0 : f64[]{}
%2 = aten::cat([%0, %0], dim=0) : i64[4, 3]{3, 1}
%3 = aten::index.Tensor(%2, indices=[None, %0]) : i64[4, 2, 3]{6, 3, 1}
%4 = aten::mul.Tensor(%3, other=%1) : f64[4, 2, 3]{6, 3, 1}
%5 = aten::clamp(%4, min=-0.5, max=0.7071067811865476) : f64[4, 2, 3]{6, 3, 1}
return %5
)";
  EXPECT_EQ(ir::AtenGraph::parse(lists).to_string(), lists);
}

TEST(AtenGraphText, ErrorsNameTheLine) {
  try {
    ir::AtenGraph::parse("%0 = input 0 : f32[2]{1}\n%1 = aten::relu(%7) : f32[2]{1}\nreturn %1\n");
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("%7 is not defined"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ir::AtenGraph::parse("%0 = input 0 : q32[2]{1}\n"), std::runtime_error);
  // One output, two types.
  EXPECT_THROW(ir::AtenGraph::parse("%0 = input 0 : f32[2]{1}\n%1 = aten::relu(%0) : f32[2]{1}, f32[2]{1}\n"), std::runtime_error);
}

TEST(Lowering, PointwisePrologueFusesIntoLayerNorm) {
  ir::Program p = lower(kPointwiseLN);
  ASSERT_EQ(p.kernels.size(), 1u) << p.to_string();
  EXPECT_EQ(externs(p), 0);
  const auto& k = p.kernels[0];
  ASSERT_EQ(k.stages.size(), 2u);
  EXPECT_EQ(k.stages[0].reduce, ir::ReduceOp::kWelford);
  EXPECT_EQ(k.outer_sizes, std::vector<int64_t>{4});
  // The prologue (mul, gelu, add) is inlined into both the statistics and the normalisation.
  EXPECT_EQ(count(p.to_string(), "gelu("), 2) << p.to_string();
  EXPECT_EQ(k.fused.size(), 4u);
}

TEST(Lowering, GatheredSumsReadTwiceAreRealizedAndIntegerPositionsAreIndexMath) {
  // NanoGPT's input: token + position embeddings, read by the first LayerNorm and by the residual
  // add after the block. Inlined, both readers gathered again through a bounds-checked index
  // (and computed arange's positions in double).
  ir::Program p = lower(R"(%0 = input 0 : i64[2, 8]{8, 1}
%1 = input 1 : f32[50, 16]{16, 1}
%2 = input 2 : f32[32, 16]{16, 1}
%3 = input 3 : f32[2, 8, 16]{128, 16, 1}
%4 = aten::embedding(%1, indices=%0, padding_idx=-1, scale_grad_by_freq=False, sparse=False) : f32[2, 8, 16]{128, 16, 1}
%5 = aten::arange(8, dtype=None, layout=None, device=cpu, pin_memory=False) : i64[8]{1}
%6 = aten::embedding(%2, indices=%5, padding_idx=-1, scale_grad_by_freq=False, sparse=False) : f32[8, 16]{16, 1}
%7 = aten::add.Tensor(%4, other=%6, alpha=1) : f32[2, 8, 16]{128, 16, 1}
%8, %9, %10 = aten::native_layer_norm(%7, normalized_shape=[16], weight=None, bias=None, eps=1e-05) : f32[2, 8, 16]{128, 16, 1}, f32[2, 8, 1]{8, 1, 1}, f32[2, 8, 1]{8, 1, 1}
%11 = aten::add.Tensor(%7, other=%3, alpha=1) : f32[2, 8, 16]{128, 16, 1}
return %8, %11
)");
  const std::string text = p.to_string();
  EXPECT_EQ(count(text, "buf1[x"), 1) << text;  // the token gather appears once
  EXPECT_EQ(count(text, "f64("), 0) << text;
  EXPECT_NE(text.find("i64(index(x1))"), std::string::npos) << text;
}

TEST(Lowering, GeluBackwardFusesWithTheRecomputedGelu) {
  // An MLP's backward under the min-cut partitioner: gelu(x) recomputed for the second weight's
  // gradient and gelu_backward(dy, x) for the first's read x in one kernel (gelu_backward was an
  // ATen call: a second pass over x).
  ir::Program p = lower(R"(%0 = input 0 : f32[4, 16]{16, 1}
%1 = input 1 : f32[4, 16]{16, 1}
%2 = aten::gelu(%0, approximate='none') : f32[4, 16]{16, 1}
%3 = aten::gelu_backward(%1, %0, approximate='tanh') : f32[4, 16]{16, 1}
return %2, %3
)");
  ASSERT_EQ(p.kernels.size(), 1u) << p.to_string();
  EXPECT_EQ(externs(p), 0);
  EXPECT_NE(p.to_string().find("mul(buf1[16*x0 + x1], gelu_tanh_grad(buf0[16*x0 + x1]))"), std::string::npos) << p.to_string();
}

TEST(Lowering, FusionOffRealizesEveryValue) {
  ir::Program p = lower(kPointwiseLN, /*fuse=*/false);
  EXPECT_GE(p.kernels.size(), 4u) << p.to_string();
  EXPECT_EQ(count(p.to_string(), "gelu("), 1);
}

TEST(Lowering, SoftmaxIsOneKernelWithTwoReductions) {
  ir::Program p = lower(R"(%0 = input 0 : f32[8, 33]{33, 1}
%1 = aten::_softmax(%0, dim=-1, half_to_float=False) : f32[8, 33]{33, 1}
return %1
)");
  ASSERT_EQ(p.kernels.size(), 1u) << p.to_string();
  const auto& st = p.kernels[0].stages;
  ASSERT_EQ(st.size(), 3u);
  EXPECT_EQ(st[0].reduce, ir::ReduceOp::kMax);
  EXPECT_EQ(st[1].reduce, ir::ReduceOp::kSum);
  EXPECT_EQ(st[2].kind, ir::Stage::kPointwise);
}

TEST(Lowering, ReductionOverTheOuterDimReadsStrided) {
  ir::Program p = lower(R"(%0 = input 0 : f32[6, 5]{5, 1}
%1 = aten::sum.dim_IntList(%0, dim=[0], keepdim=False, dtype=None) : f32[5]{1}
return %1
)");
  ASSERT_EQ(p.kernels.size(), 1u);
  EXPECT_NE(p.to_string().find("r0 = sum over[6] of buf0[x0 + 5*x1]"), std::string::npos) << p.to_string();
}

// Layer norm's backward is generated code: the two row sums and dx in one kernel; the weight and
// bias gradients (column sums, whose per-row mean and rstd do not vary along the columns) each in a
// kernel of their own, where the code generator runs them column-blocked.
TEST(Lowering, LayerNormBackwardIsRowKernelAndColumnKernels) {
  ir::Program p = lower(R"(%0 = input 0 : f32[32, 16]{16, 1}
%1 = input 1 : f32[32, 16]{16, 1}
%2 = input 2 : f32[32, 1]{1, 1}
%3 = input 3 : f32[32, 1]{1, 1}
%4 = input 4 : f32[16]{1}
%5, %6, %7 = aten::native_layer_norm_backward(%0, input=%1, normalized_shape=[16], mean=%2, rstd=%3, weight=%4, bias=%4, output_mask=[True, True, True]) : f32[32, 16]{16, 1}, f32[16]{1}, f32[16]{1}
return %5, %6, %7
)");
  EXPECT_EQ(externs(p), 0) << p.to_string();
  ASSERT_EQ(p.kernels.size(), 3u) << p.to_string();
  const auto& rows = p.kernels[0].stages;
  ASSERT_EQ(rows.size(), 3u) << p.to_string();
  EXPECT_EQ(rows[0].reduce, ir::ReduceOp::kSum);
  EXPECT_EQ(rows[1].reduce, ir::ReduceOp::kSum);
  EXPECT_EQ(rows[2].kind, ir::Stage::kPointwise);
  for (int k = 1; k < 3; ++k) {
    EXPECT_EQ(p.kernels[k].stages[0].kind, ir::Stage::kReduction);
    EXPECT_EQ(p.kernels[k].outer_sizes, (std::vector<int64_t>{16})) << p.to_string();
  }
}

TEST(Lowering, SoftmaxBackwardIsOneKernel) {
  ir::Program p = lower(R"(%0 = input 0 : f32[8, 33]{33, 1}
%1 = input 1 : f32[8, 33]{33, 1}
%2 = aten::_softmax_backward_data(%0, output=%1, dim=-1, input_dtype=f32) : f32[8, 33]{33, 1}
return %2
)");
  EXPECT_EQ(externs(p), 0) << p.to_string();
  ASSERT_EQ(p.kernels.size(), 1u) << p.to_string();
  EXPECT_EQ(p.kernels[0].stages.size(), 2u) << p.to_string();
}

TEST(Lowering, ExternsSplitKernelsAndBuffersAreReleasedAndReused) {
  ir::Program p = lower(R"(%0 = input 0 : f32[8, 8]{8, 1}
%1 = input 1 : f32[8, 8]{8, 1}
%2 = aten::sigmoid(%0) : f32[8, 8]{8, 1}
%3 = aten::mm(%2, mat2=%1) : f32[8, 8]{8, 1}
%4 = aten::relu(%3) : f32[8, 8]{8, 1}
%5 = aten::mm(%4, mat2=%1) : f32[8, 8]{8, 1}
%6 = aten::tanh(%5) : f32[8, 8]{8, 1}
return %6
)");
  EXPECT_EQ(p.kernels.size(), 3u) << p.to_string();
  EXPECT_EQ(externs(p), 2);
  const std::string t = p.to_string();
  // sigmoid's buffer is released after the first mm and its memory taken by relu's.
  EXPECT_NE(t.find("extern node 1 aten::mm args[2, 1] -> [3]\n  free [2]"), std::string::npos) << t;
  EXPECT_NE(t.find("reuses buf2"), std::string::npos) << t;
}

TEST(Lowering, ViewsBecomeIndexAlgebra) {
  ir::Program p = lower(R"(%0 = input 0 : f32[4, 6]{6, 1}
%1 = aten::view(%0, size=[2, 2, 6]) : f32[2, 2, 6]{12, 6, 1}
%2 = aten::permute(%1, dims=[2, 0, 1]) : f32[6, 2, 2]{1, 12, 6}
%3 = aten::mul.Tensor(%2, other=%2) : f32[6, 2, 2]{1, 12, 6}
return %3
)");
  ASSERT_EQ(p.kernels.size(), 1u);
  EXPECT_EQ(externs(p), 0);
  // The output keeps the permuted (dense) layout, so the loop walks the input contiguously.
  EXPECT_NE(p.to_string().find("buf0[12*x0 + 6*x1 + x2]"), std::string::npos) << p.to_string();
}

TEST(Lowering, UnknownOperatorsAreExternCalls) {
  ir::Program p = lower(R"(%0 = input 0 : f32[3, 4]{4, 1}
%1 = aten::cumsum(%0, dim=1, dtype=None) : f32[3, 4]{4, 1}
%2 = aten::exp(%1) : f32[3, 4]{4, 1}
return %2
)");
  EXPECT_EQ(externs(p), 1);
  EXPECT_EQ(p.kernels.size(), 1u);
}

TEST(Lowering, ArgmaxAndGatherAndGroupNorm) {
  ir::Program a = lower(R"(%0 = input 0 : f32[3, 40]{40, 1}
%1 = aten::argmax(%0, dim=1, keepdim=False) : i64[3]{1}
return %1
)");
  EXPECT_NE(a.to_string().find("= argmax over[40]"), std::string::npos) << a.to_string();
  ir::Program g = lower(R"(%0 = input 0 : f32[3, 4]{4, 1}
%1 = input 1 : i64[3, 2]{2, 1}
%2 = aten::gather(%0, dim=1, index=%1, sparse_grad=False) : f32[3, 2]{2, 1}
return %2
)");
  EXPECT_EQ(externs(g), 0);
  EXPECT_NE(g.to_string().find("buf0[4*x0 + 1*buf1[2*x0 + x1]]"), std::string::npos) << g.to_string();
  ir::Program n = lower(R"(%0 = input 0 : f32[2, 6, 5]{30, 5, 1}
%1, %2, %3 = aten::native_group_norm(%0, weight=None, bias=None, N=2, C=6, HxW=5, group=3, eps=1e-05) : f32[2, 6, 5]{30, 5, 1}, f32[2, 3]{3, 1}, f32[2, 3]{3, 1}
return %1
)");
  EXPECT_EQ(externs(n), 0);
  EXPECT_NE(n.to_string().find("welford over[10]"), std::string::npos) << n.to_string();
}

TEST(Placement, LoopOrderFollowsStrides) {
  EXPECT_EQ(schedule::loop_order({4, 5, 6}, {30, 6, 1}), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(schedule::loop_order({4, 5, 6}, {1, 24, 4}), (std::vector<int>{1, 2, 0}));
  EXPECT_EQ(schedule::loop_order({4, 1, 6}, {6, 6, 1}), (std::vector<int>{1, 0, 2}));
}

TEST(MemoryPlan, OutputsAndInputsAreNeverReleased) {
  ir::Program p = lower(R"(%0 = input 0 : f32[8, 8]{8, 1}
%1 = aten::exp(%0) : f32[8, 8]{8, 1}
%2 = aten::mm(%1, mat2=%1) : f32[8, 8]{8, 1}
%3 = aten::sin(%2) : f32[8, 8]{8, 1}
return %3, %1
)");
  for (const auto& f : p.frees)
    for (int b : f) {
      EXPECT_NE(p.buffers[b].kind, ir::Buffer::kInput);
      for (int o : p.outputs) EXPECT_NE(b, o) << p.to_string();
    }
}

// The program text is the compile cache's key: programs that compute different things must
// never print the same (constants at full precision, operator parameters, result types).
TEST(ProgramText, DistinguishesEverythingThatChangesTheCode) {
  auto text_of = [](const std::string& op_line) {
    return lower("%0 = input 0 : f32[4]{1}\n" + op_line + "\nreturn %1\n").to_string();
  };
  EXPECT_NE(text_of("%1 = aten::mul.Scalar(%0, other=1.0000001) : f32[4]{1}"),
            text_of("%1 = aten::mul.Scalar(%0, other=1.0000002) : f32[4]{1}"));
  EXPECT_NE(text_of("%1 = aten::leaky_relu(%0, negative_slope=0.01) : f32[4]{1}"),
            text_of("%1 = aten::leaky_relu(%0, negative_slope=0.02) : f32[4]{1}"));
  EXPECT_NE(text_of("%1 = aten::lt.Scalar(%0, other=0.5) : b8[4]{1}"),
            text_of("%1 = aten::lt.Scalar(%0, other=0.5000000000000001) : b8[4]{1}"));
}

TEST(Fusion, LongPointwiseChainsAreCutSoExpressionsStayShallow) {
  // 3,000 single-use pointwise ops would fuse into one expression 3,000 deep, which the code
  // generator renders recursively (a stack overflow under AddressSanitizer): values are realized
  // once their inlined expression passes max_expression_cost.
  std::string text = "%0 = input 0 : f32[8]{1}\n";
  for (int i = 1; i <= 3000; ++i) text += "%" + std::to_string(i) + " = aten::relu(%" + std::to_string(i - 1) + ") : f32[8]{1}\n";
  text += "return %3000\n";
  ir::Program p = lower(text);
  lowering::LoweringOptions o;
  EXPECT_GE(p.kernels.size(), static_cast<size_t>(3000 / o.max_expression_cost));
  EXPECT_LE(p.kernels.size(), static_cast<size_t>(3000 / o.max_expression_cost + 2));
}

TEST(Lowering, AnIntegerDivisionNoOutputDependsOnStillRuns) {
  // remainder(%0, %0) is read once, by sign(), which nothing reads: inlined into sign, neither was
  // computed and a zero divisor did not raise (fuzz seed 21498). It gets a buffer of its own.
  ir::Program p = lower(R"(%0 = input 0 : i64[4]{1}
%1 = input 1 : f32[4]{1}
%2 = aten::remainder.Tensor(%0, other=%0) : i64[4]{1}
%3 = aten::sign(%2) : i64[4]{1}
%4 = aten::mul.Tensor(%1, other=%1) : f32[4]{1}
return %4
)");
  EXPECT_NE(p.to_string().find("buf2[x0] = remainder(buf0[x0], buf0[x0])"), std::string::npos) << p.to_string();
  EXPECT_EQ(p.to_string().find("sign("), std::string::npos) << p.to_string();
}

// RoPE as Llama writes it: cos and sin of [positions, head_dim] computed in float, cast to the
// model's dtype, then broadcast over batch and heads by the q and k rotations. Through the cast
// they are still transcendental values read broadcast: realized once, in a kernel of their own,
// not recomputed per head in each rotation (hf_llama on an H200: every q and k kernel evaluated
// cosf and sinf per element). What reads the realized values is plain loads: the rotations
// themselves are not realized again for it (k's rotation stays inlined into its repeat).
TEST(Fusion, RopeCosSinThroughACastAreRealizedOnceAndReadByTheRotations) {
  const char* text = R"(%0 = input 0 : f32[2, 4, 8, 16]{512, 128, 16, 1}
%1 = input 1 : f32[8, 16]{16, 1}
%2 = input 2 : bf16[2, 2, 8, 16]{256, 128, 16, 1}
%3 = aten::cos(%1) : f32[8, 16]{16, 1}
%4 = aten::sin(%1) : f32[8, 16]{16, 1}
%5 = aten::_to_copy(%3, dtype=bf16, layout=None, device=None, pin_memory=None, non_blocking=False, memory_format=None) : bf16[8, 16]{16, 1}
%6 = aten::_to_copy(%4, dtype=bf16, layout=None, device=None, pin_memory=None, non_blocking=False, memory_format=None) : bf16[8, 16]{16, 1}
%7 = aten::_to_copy(%0, dtype=bf16, layout=None, device=None, pin_memory=None, non_blocking=False, memory_format=None) : bf16[2, 4, 8, 16]{512, 128, 16, 1}
%8 = aten::mul.Tensor(%7, other=%5) : bf16[2, 4, 8, 16]{512, 128, 16, 1}
%9 = aten::mul.Tensor(%7, other=%6) : bf16[2, 4, 8, 16]{512, 128, 16, 1}
%10 = aten::add.Tensor(%8, other=%9, alpha=1) : bf16[2, 4, 8, 16]{512, 128, 16, 1}
%11 = aten::mul.Tensor(%2, other=%5) : bf16[2, 2, 8, 16]{256, 128, 16, 1}
%12 = aten::unsqueeze(%11, dim=2) : bf16[2, 2, 1, 8, 16]{256, 128, 128, 16, 1}
%13 = aten::expand(%12, size=[2, 2, 2, 8, 16], implicit=False) : bf16[2, 2, 2, 8, 16]{256, 128, 0, 16, 1}
%14 = aten::clone(%13, memory_format=0) : bf16[2, 2, 2, 8, 16]{512, 256, 128, 16, 1}
return %10, %14
)";
  const std::string prog = lower(text).to_string();
  EXPECT_EQ(count(prog, "cos("), 1) << prog;
  EXPECT_EQ(count(prog, "sin("), 1) << prog;
  // Two realized rotation inputs (cos, sin) and the two outputs: k's rotation is not a buffer.
  EXPECT_EQ(count(prog, "] = "), 4) << prog;
}

// The residual stream on CUDA (Lowerer::store_beside): h = x + a, read by a norm and, after a
// matmul, by h2 = h + mm; h2 read by the second norm and by h2 + h. h is stored by the first norm's
// kernel and the second kernel loads it (not x and a); h2's readers are all in the second norm's
// kernel, so its store is dropped. Off on the CPU (one kernel, no stored sum, reads x and a twice).
TEST(Lowering, ResidualSumIsStoredBesideItsNormOnCuda) {
  std::string text = R"(%0 = input 0 : f32[32, 768]{768, 1}
%1 = input 1 : f32[32, 768]{768, 1}
%2 = input 2 : f32[768]{1}
%3 = input 3 : f32[768]{1}
%4 = input 4 : f32[768, 768]{768, 1}
%5 = aten::add.Tensor(%0, other=%1, alpha=1) : f32[32, 768]{768, 1}
%6, %7, %8 = aten::native_layer_norm(%5, normalized_shape=[768], weight=%2, bias=%3, eps=1e-05) : f32[32, 768]{768, 1}, f32[32, 1]{1, 1}, f32[32, 1]{1, 1}
%9 = aten::mm(%6, mat2=%4) : f32[32, 768]{768, 1}
%10 = aten::add.Tensor(%5, other=%9, alpha=1) : f32[32, 768]{768, 1}
%11, %12, %13 = aten::native_layer_norm(%10, normalized_shape=[768], weight=%2, bias=%3, eps=1e-05) : f32[32, 768]{768, 1}, f32[32, 1]{1, 1}, f32[32, 1]{1, 1}
%14 = aten::add.Tensor(%10, other=%5, alpha=1) : f32[32, 768]{768, 1}
return %11, %14
)";
  const std::string cpu = lower(text).to_string();
  for (size_t at = text.find('}'); at != std::string::npos; at = text.find('}', at + 1)) text.insert(at + 1, "@device");
  lowering::LoweringOptions o;
  o.cuda = true;
  ir::Program p = lowering::Lowerer(ir::AtenGraph::parse(text), o).run();
  schedule::plan_memory(p);
  const std::string device = p.to_string();
  ASSERT_EQ(p.kernels.size(), 2u) << device;
  // kernel0: the norm's reduction, the stored h, the norm's output.
  EXPECT_EQ(p.kernels[0].stages.size(), 3u) << device;
  // kernel1: the reduction, the second norm's output and h2 + h; no store of h2.
  EXPECT_EQ(p.kernels[1].stages.size(), 3u) << device;
  const std::string k1 = device.substr(device.find("kernel kernel1"));
  EXPECT_EQ(count(k1, "buf0["), 0) << device;  // x and a are not read again
  EXPECT_EQ(count(k1, "buf1["), 0) << device;
  EXPECT_EQ(count(cpu, "for["), count(device, "for[") - 1) << cpu;  // the CPU stores no sum
}

// A value stored beside its reduction and also gathered (store_beside's loader computes it inline
// in its writer's kernel): the gather reads the stored buffer from a later kernel. Lowering threw
// "indirect read of a value that is not a plain buffer load", so the graph ran eagerly.
TEST(Lowering, AGatherReadsAValueStoredBesideItsReduction) {
  const char* text = R"(%0 = input 0 : f32[8, 16]{16, 1}@device
%1 = input 1 : f32[8, 16]{16, 1}@device
%2 = input 2 : i64[8, 4]{4, 1}@device
%3 = aten::add.Tensor(%0, other=%1, alpha=1) : f32[8, 16]{16, 1}@device
%4 = aten::sum.dim_IntList(%3, dim=[1], keepdim=True, dtype=None) : f32[8, 1]{1, 1}@device
%5 = aten::gather(%3, dim=1, index=%2, sparse_grad=False) : f32[8, 4]{4, 1}@device
%6 = aten::mul.Tensor(%4, other=%5) : f32[8, 4]{4, 1}@device
return %6
)";
  lowering::LoweringOptions o;
  o.cuda = true;
  ir::Program p = lowering::Lowerer(ir::AtenGraph::parse(text), o).run();
  const std::string prog = p.to_string();
  ASSERT_EQ(p.kernels.size(), 2u) << prog;
  EXPECT_EQ(count(prog.substr(prog.find("kernel kernel1")), "buf3["), 1) << prog;  // the stored sum, gathered
}
