// Golden tests of generated CUDA source (no GPU needed): each graph's kernels and launch records
// must equal tests/cpp/data/golden_cuda/<name>.txt (KILN_UPDATE_GOLDEN=1 rewrites them). Where
// nvcc is on the PATH, each source is also compiled for sm_90 (nvcc -cubin), so a generated
// kernel that NVRTC would reject fails here, on a machine without a GPU.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "codegen/cuda/cuda_codegen.h"
#include "codegen/cuda/kernel_dedup.h"
#include "codegen/cuda/matmul_epilogue.h"
#include "ir/aten_graph.h"
#include "lowering/lowerer.h"
#include "schedule/memory_plan.h"

using namespace kiln;

namespace {

struct Case { const char* name; const char* graph; };

// Tensors on the GPU print as "@device" in the graph text.
const Case kCases[] = {
    {"pointwise_layer_norm", R"(%0 = input 0 : f32[64, 4096]{4096, 1}@device
%1 = input 1 : f32[4096]{1}@device
%2 = input 2 : f32[4096]{1}@device
%3 = aten::mul.Tensor(%0, other=%1) : f32[64, 4096]{4096, 1}@device
%4 = aten::add.Tensor(%3, other=%2, alpha=1) : f32[64, 4096]{4096, 1}@device
%5 = aten::gelu(%4, approximate='none') : f32[64, 4096]{4096, 1}@device
%6 = aten::add.Tensor(%5, other=%0, alpha=1) : f32[64, 4096]{4096, 1}@device
%7, %8, %9 = aten::native_layer_norm(%6, normalized_shape=[4096], weight=%1, bias=%2, eps=1e-05) : f32[64, 4096]{4096, 1}@device, f32[64, 1]{1, 1}@device, f32[64, 1]{1, 1}@device
return %7
)"},
    // The bench's pointwise_ln (8192 rows of 4096 floats, the layer norm's own weight and bias):
    // the layer norm's statistics fold gelu(x * w + b) + x, which the normalized output needs
    // again: kept in registers (row value cache), x read once, erf once per element; mean and
    // variance by two passes over those registers (no Welford steps).
    {"pointwise_layer_norm_value_cache", R"(%0 = input 0 : f32[8192, 4096]{4096, 1}@device
%1 = input 1 : f32[4096]{1}@device
%2 = input 2 : f32[4096]{1}@device
%3 = input 3 : f32[4096]{1}@device
%4 = input 4 : f32[4096]{1}@device
%5 = aten::mul.Tensor(%0, other=%1) : f32[8192, 4096]{4096, 1}@device
%6 = aten::add.Tensor(%5, other=%2, alpha=1) : f32[8192, 4096]{4096, 1}@device
%7 = aten::gelu(%6, approximate='none') : f32[8192, 4096]{4096, 1}@device
%8 = aten::add.Tensor(%7, other=%0, alpha=1) : f32[8192, 4096]{4096, 1}@device
%9, %10, %11 = aten::native_layer_norm(%8, normalized_shape=[4096], weight=%3, bias=%4, eps=1e-05) : f32[8192, 4096]{4096, 1}@device, f32[8192, 1]{1, 1}@device, f32[8192, 1]{1, 1}@device
return %9
)"},
    {"masked_softmax", R"(%0 = input 0 : f32[2, 4, 16, 16]{1024, 256, 16, 1}@device
%1 = aten::ones(size=[16, 16], dtype=b8, layout=None, device=None, pin_memory=False) : b8[16, 16]{16, 1}@device
%2 = aten::tril(%1, diagonal=0) : b8[16, 16]{16, 1}@device
%3 = aten::bitwise_not(%2) : b8[16, 16]{16, 1}@device
%4 = aten::masked_fill.Scalar(%0, mask=%3, value=-inf) : f32[2, 4, 16, 16]{1024, 256, 16, 1}@device
%5 = aten::_softmax(%4, dim=-1, half_to_float=False) : f32[2, 4, 16, 16]{1024, 256, 16, 1}@device
return %5
)"},
    {"bf16_gelu_with_tail", R"(%0 = input 0 : bf16[1001]{1}@device
%1 = input 1 : bf16[1001]{1}@device
%2 = aten::add.Tensor(%0, other=%1, alpha=1) : bf16[1001]{1}@device
%3 = aten::gelu(%2, approximate='tanh') : bf16[1001]{1}@device
return %3
)"},
    {"f16_transpose_add", R"(%0 = input 0 : f16[64, 48]{48, 1}@device
%1 = input 1 : f16[48, 64]{64, 1}@device
%2 = aten::t(%1) : f16[64, 48]{1, 64}@device
%3 = aten::add.Tensor(%0, other=%2, alpha=1) : f16[64, 48]{48, 1}@device
return %3
)"},
    {"column_sum_and_argmax_bf16", R"(%0 = input 0 : bf16[100, 24]{24, 1}@device
%1 = aten::sum.dim_IntList(%0, dim=[0], keepdim=False, dtype=None) : bf16[24]{1}@device
%2 = aten::argmax(%0, dim=1, keepdim=True) : i64[100, 1]{1, 1}@device
return %1, %2
)"},
    {"long_row_softmax_and_var", R"(%0 = input 0 : f32[8, 8192]{8192, 1}@device
%1 = aten::_softmax(%0, dim=-1, half_to_float=False) : f32[8, 8192]{8192, 1}@device
%2 = aten::var.correction(%0, dim=[1], correction=1, keepdim=False) : f32[8]{1}@device
return %1, %2
)"},
    {"embedding_gather", R"(%0 = input 0 : i64[4, 6]{6, 1}@device
%1 = input 1 : f32[50, 8]{8, 1}@device
%2 = aten::embedding(%1, indices=%0, padding_idx=-1, scale_grad_by_freq=False, sparse=False) : f32[4, 6, 8]{48, 8, 1}@device
%3 = aten::mul.Tensor(%2, other=%2) : f32[4, 6, 8]{48, 8, 1}@device
return %3
)"},
    {"bf16_residual_layer_norm_row_cache", R"(%0 = input 0 : bf16[64, 768]{768, 1}@device
%1 = input 1 : bf16[64, 768]{768, 1}@device
%2 = input 2 : bf16[768]{1}@device
%3 = input 3 : bf16[768]{1}@device
%4 = aten::add.Tensor(%0, other=%1, alpha=1) : bf16[64, 768]{768, 1}@device
%5, %6, %7 = aten::native_layer_norm(%4, normalized_shape=[768], weight=%2, bias=%3, eps=1e-05) : bf16[64, 768]{768, 1}@device, f32[64, 1]{1, 1}@device, f32[64, 1]{1, 1}@device
return %5
)"},
    // Two residual steps of a transformer: h = x + a feeds a layer norm and, after a matmul,
    // the next residual add. The first layer norm's kernel also stores h (read by kernel1 from
    // memory), so the second norm reads h and the matmul's output, not x, a and the output.
    {"residual_stream_stored_beside_its_norm", R"(%0 = input 0 : bf16[32, 768]{768, 1}@device
%1 = input 1 : bf16[32, 768]{768, 1}@device
%2 = input 2 : bf16[768]{1}@device
%3 = input 3 : bf16[768]{1}@device
%4 = input 4 : bf16[768, 768]{768, 1}@device
%5 = aten::add.Tensor(%0, other=%1, alpha=1) : bf16[32, 768]{768, 1}@device
%6, %7, %8 = aten::native_layer_norm(%5, normalized_shape=[768], weight=%2, bias=%3, eps=1e-05) : bf16[32, 768]{768, 1}@device, f32[32, 1]{1, 1}@device, f32[32, 1]{1, 1}@device
%9 = aten::mm(%6, mat2=%4) : bf16[32, 768]{768, 1}@device
%10 = aten::add.Tensor(%5, other=%9, alpha=1) : bf16[32, 768]{768, 1}@device
%11, %12, %13 = aten::native_layer_norm(%10, normalized_shape=[768], weight=%2, bias=%3, eps=1e-05) : bf16[32, 768]{768, 1}@device, f32[32, 1]{1, 1}@device, f32[32, 1]{1, 1}@device
return %11
)"},
    // A decoding step's shape: the layer norm of 8 tokens fused with the concatenation of a key
    // cache (133k elements a row): 8 rows split over many blocks, each recomputing its row's
    // statistics and taking a share of the copy.
    {"few_rows_bulk_pointwise_split", R"(%0 = input 0 : bf16[8, 2048]{2048, 1}@device
%1 = input 1 : bf16[8, 16, 64, 128]{131072, 8192, 128, 1}@device
%2 = input 2 : bf16[8, 16, 1, 128]{2048, 128, 128, 1}@device
%3 = input 3 : bf16[2048]{1}@device
%4, %5, %6 = aten::native_layer_norm(%0, normalized_shape=[2048], weight=%3, bias=%3, eps=1e-05) : bf16[8, 2048]{2048, 1}@device, f32[8, 1]{1, 1}@device, f32[8, 1]{1, 1}@device
%7 = aten::cat([%1, %2], dim=2) : bf16[8, 16, 65, 128]{133120, 8320, 128, 1}@device
return %4, %7
)"},
    // ResNet's stem after its convolution, channels-last: batch norm and ReLU fuse into the 3x3
    // stride-2 max pooling (indices read by nothing), read as vectors of 4 channels at each
    // window position; positions in the padding are moved into the input and masked to -inf.
    {"bn_relu_max_pool_channels_last", R"(%0 = input 0 : f32[4, 64, 16, 16]{16384, 1, 1024, 64}@device
%1 = input 1 : f32[64]{1}@device
%2 = input 2 : f32[64]{1}@device
%3 = input 3 : f32[64]{1}@device
%4 = input 4 : f32[64]{1}@device
%5, %6, %7, %8 = aten::cudnn_batch_norm(%0, weight=%1, bias=%2, running_mean=%3, running_var=%4, training=False, exponential_average_factor=0.1, epsilon=1e-05) : f32[4, 64, 16, 16]{16384, 1, 1024, 64}@device, f32[0]{1}@device, f32[0]{1}@device, u8[0]{1}@device
%9 = aten::relu(%5) : f32[4, 64, 16, 16]{16384, 1, 1024, 64}@device
%10, %11 = aten::max_pool2d_with_indices(%9, kernel_size=[3, 3], stride=[2, 2], padding=[1, 1], dilation=[1, 1], ceil_mode=False) : f32[4, 64, 8, 8]{4096, 1, 512, 64}@device, i64[4, 64, 8, 8]{4096, 1, 512, 64}@device
return %10
)"},
    // The end of ResNet-50's first downsampling block (batch 32): two batch norms, an add and a
    // ReLU over channels-last activations. Each 1/sqrt(var + eps) varies with the channel alone
    // and is computed once per thread before the grid-stride loop (hoist_channel_invariants);
    // the grid is an eighth of one group per thread, so each thread makes eight trips.
    {"two_batch_norms_add_relu_channels_last", R"(%0 = input 0 : f32[32, 256, 56, 56]{802816, 1, 14336, 256}@device
%1 = input 1 : f32[32, 256, 56, 56]{802816, 1, 14336, 256}@device
%2 = input 2 : f32[256]{1}@device
%3 = input 3 : f32[256]{1}@device
%4 = input 4 : f32[256]{1}@device
%5 = input 5 : f32[256]{1}@device
%6 = input 6 : f32[256]{1}@device
%7 = input 7 : f32[256]{1}@device
%8 = input 8 : f32[256]{1}@device
%9 = input 9 : f32[256]{1}@device
%10, %11, %12, %13 = aten::cudnn_batch_norm(%0, weight=%2, bias=%3, running_mean=%4, running_var=%5, training=False, exponential_average_factor=0.1, epsilon=1e-05) : f32[32, 256, 56, 56]{802816, 1, 14336, 256}@device, f32[0]{1}@device, f32[0]{1}@device, u8[0]{1}@device
%14, %15, %16, %17 = aten::cudnn_batch_norm(%1, weight=%6, bias=%7, running_mean=%8, running_var=%9, training=False, exponential_average_factor=0.1, epsilon=1e-05) : f32[32, 256, 56, 56]{802816, 1, 14336, 256}@device, f32[0]{1}@device, f32[0]{1}@device, u8[0]{1}@device
%18 = aten::add.Tensor(%10, other=%14, alpha=1) : f32[32, 256, 56, 56]{802816, 1, 14336, 256}@device
%19 = aten::relu(%18) : f32[32, 256, 56, 56]{802816, 1, 14336, 256}@device
return %19
)"},
    // Llama's rotate_half on q in its [b, s, h, d] memory (a transposed view): x * cos +
    // cat(-x[..., 64:], x[..., :64]) * sin. The halves are read at `d % 64 + 64` and `d % 64`:
    // a group of 8 lanes never crosses a multiple of 64, so both are vector loads too.
    {"rope_rotate_half_bf16", R"(%0 = input 0 : bf16[2, 8, 4, 128]{4096, 128, 1024, 1}@device
%1 = input 1 : bf16[1, 1, 8, 128]{1024, 1024, 128, 1}@device
%2 = input 2 : bf16[1, 1, 8, 128]{1024, 1024, 128, 1}@device
%3 = aten::mul.Tensor(%0, other=%1) : bf16[2, 8, 4, 128]{4096, 128, 1024, 1}@device
%4 = aten::slice.Tensor(%0, dim=3, start=0, end=64, step=1) : bf16[2, 8, 4, 64]{4096, 128, 1024, 1}@device
%5 = aten::slice.Tensor(%0, dim=3, start=64, end=9223372036854775807, step=1) : bf16[2, 8, 4, 64]{4096, 128, 1024, 1}+64@device
%6 = aten::neg(%5) : bf16[2, 8, 4, 64]{2048, 64, 512, 1}@device
%7 = aten::cat([%6, %4], dim=-1) : bf16[2, 8, 4, 128]{4096, 512, 128, 1}@device
%8 = aten::mul.Tensor(%7, other=%2) : bf16[2, 8, 4, 128]{4096, 512, 128, 1}@device
%9 = aten::add.Tensor(%3, other=%8, alpha=1) : bf16[2, 8, 4, 128]{4096, 128, 1024, 1}@device
return %9
)"},
    {"full_sum_max_int", R"(%0 = input 0 : i32[37, 5]{5, 1}@device
%1 = aten::sum(%0, dtype=None) : i64[]{}@device
%2 = aten::amax(%0, dim=[1], keepdim=False) : i32[37]{1}@device
%3 = aten::remainder.Tensor(%0, other=%0) : i32[37, 5]{5, 1}@device
return %1, %2, %3
)"},
};

std::string read(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

bool have_nvcc() {
  static const bool yes = std::system("nvcc --version > /dev/null 2>&1") == 0;
  return yes;
}

lowering::LoweringOptions cuda_options() {
  lowering::LoweringOptions o;
  o.cuda = true;
  return o;
}

class CudaGolden : public ::testing::TestWithParam<Case> {};

TEST_P(CudaGolden, SourceAndLaunchesMatch) {
  const Case& c = GetParam();
  ir::Program p = lowering::Lowerer(ir::AtenGraph::parse(c.graph), cuda_options()).run();
  schedule::plan_memory(p);
  codegen::CudaModule m = codegen::generate_cuda(p);
  const std::string prefix = codegen::cuda_prefix_header();
  ASSERT_EQ(m.source.compare(0, prefix.size(), prefix), 0);
  std::string actual = "# program\n" + p.to_string() + "\n# launches\n";
  for (const auto& k : m.kernels) actual += codegen::launch_string(k) + "\n";
  actual += "\n# code\n" + m.source.substr(prefix.size());
  const std::string path = std::string(KILN_TEST_DATA) + "/golden_cuda/" + c.name + ".txt";
  if (const char* u = std::getenv("KILN_UPDATE_GOLDEN"); u && *u == '1') {
    std::ofstream(path) << actual;
  } else {
    const std::string expected = read(path);
    ASSERT_FALSE(expected.empty()) << "missing " << path << " (run with KILN_UPDATE_GOLDEN=1)";
    EXPECT_EQ(actual, expected) << "generated CUDA changed; review and run with KILN_UPDATE_GOLDEN=1";
  }
  if (!have_nvcc()) GTEST_SKIP() << "nvcc not found: generated source not compiled";
  const std::string cu = std::string(::testing::TempDir()) + "kiln_golden_" + c.name + ".cu";
  std::ofstream(cu) << m.source;
  const std::string cmd = "nvcc -arch=sm_90 -cubin -std=c++17 -o " + cu + ".cubin " + cu + " > " + cu + ".log 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << read(cu + ".log");
}

INSTANTIATE_TEST_SUITE_P(Graphs, CudaGolden, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

// A GPT MLP's up-projection: addmm, a view back to [batch, tokens, 4d], gelu(tanh), read by the
// down-projection. The addmm becomes _addmm_activation(use_gelu=True) and the down-projection
// reads the view; a relu likewise (use_gelu=False).
const char* kMlp = R"(%0 = input 0 : bf16[2, 8, 16]{128, 16, 1}@device
%1 = input 1 : bf16[64, 16]{16, 1}@device
%2 = input 2 : bf16[64]{1}@device
%3 = input 3 : bf16[16, 64]{64, 1}@device
%4 = aten::view(%0, size=[16, 16]) : bf16[16, 16]{16, 1}@device
%5 = aten::t(%1) : bf16[16, 64]{1, 16}@device
%6 = aten::addmm(%2, mat1=%4, mat2=%5, beta=1, alpha=1) : bf16[16, 64]{64, 1}@device
%7 = aten::view(%6, size=[2, 8, 64]) : bf16[2, 8, 64]{512, 64, 1}@device
%8 = aten::gelu(%7, approximate='tanh') : bf16[2, 8, 64]{512, 64, 1}@device
%9 = aten::view(%8, size=[16, 64]) : bf16[16, 64]{64, 1}@device
%10 = aten::t(%3) : bf16[64, 16]{1, 64}@device
%11 = aten::mm(%9, mat2=%10) : bf16[16, 16]{16, 1}@device
%12 = aten::relu(%11) : bf16[16, 16]{16, 1}@device
return %12
)";

TEST(MatmulEpilogue, AddmmGeluBecomesAddmmActivation) {
  ir::AtenGraph g = ir::AtenGraph::parse(kMlp);
  auto done = codegen::fuse_matmul_epilogues(g);
  ASSERT_EQ(done.size(), 1u);  // the relu follows mm (no bias): left alone
  EXPECT_EQ(done[0].node, 2);
  EXPECT_TRUE(done[0].use_gelu);
  const ir::AtenNode& mm = g.nodes[2];
  EXPECT_EQ(mm.op, "aten::_addmm_activation");
  ASSERT_EQ(mm.args.size(), 6u);
  EXPECT_EQ(mm.args[5].name, "use_gelu");
  EXPECT_EQ(mm.args[5].i, 1);
  EXPECT_EQ(g.nodes[5].args[0].value, g.nodes[3].outputs[0]);  // the view of the result, not the gelu's
  EXPECT_EQ(g.use_counts()[g.nodes[4].outputs[0]], 0);          // the gelu: no reader left
  // The rewritten graph lowers (the gelu is never computed) and prints.
  ir::Program p = lowering::Lowerer(g, cuda_options()).run();
  EXPECT_EQ(p.kernels.size(), 1u) << p.to_string();  // the final relu
  EXPECT_NE(g.to_string().find("aten::_addmm_activation(%2, mat1=%4, mat2=%5, beta=1, alpha=1, use_gelu=True)"), std::string::npos)
      << g.to_string();
}

TEST(MatmulEpilogue, LeavesOtherShapesAlone) {
  auto rewrites = [](std::string text) { ir::AtenGraph g = ir::AtenGraph::parse(text); return codegen::fuse_matmul_epilogues(g).size(); };
  auto replace = [](std::string s, const std::string& a, const std::string& b) { s.replace(s.find(a), a.size(), b); return s; };
  EXPECT_EQ(rewrites(kMlp), 1u);
  EXPECT_EQ(rewrites(replace(kMlp, "approximate='tanh'", "approximate='none'")), 0u);  // erf GELU: no cuBLASLt epilogue
  EXPECT_EQ(rewrites(replace(kMlp, "return %12", "return %12, %7")), 0u);             // the pre-activation is read elsewhere
  EXPECT_EQ(rewrites(replace(kMlp, "return %12", "return %12, %8")), 0u);             // the activation is an output
  EXPECT_EQ(rewrites(replace(kMlp, "beta=1, alpha=1", "beta=1, alpha=2")), 0u);
  EXPECT_EQ(rewrites(replace(kMlp, "%2 = input 2 : bf16[64]{1}", "%2 = input 2 : bf16[1]{1}")), 0u);  // a broadcast bias
}

// Which kernels take the error flag: an integer division by a tensor does; one by a nonzero
// constant and an embedding's gather (a device-side assertion, no flag, no host sync) do not.
TEST(CudaChecks, OnlyDivisionsByTensorsSetTheFlag) {
  auto checks = [](const char* text) {
    ir::Program p = lowering::Lowerer(ir::AtenGraph::parse(text), cuda_options()).run();
    schedule::plan_memory(p);
    codegen::CudaModule m = codegen::generate_cuda(p);
    bool any = false;
    for (const auto& k : m.kernels) any = any || k.checks;
    return std::make_pair(any, m.source.substr(codegen::cuda_prefix_header().size()));
  };
  auto [by_tensor, src1] = checks(R"(%0 = input 0 : i32[37, 5]{5, 1}@device
%1 = aten::remainder.Tensor(%0, other=%0) : i32[37, 5]{5, 1}@device
return %1
)");
  EXPECT_TRUE(by_tensor) << src1;
  auto [by_constant, src2] = checks(R"(%0 = input 0 : i32[37, 5]{5, 1}@device
%1 = aten::remainder.Scalar(%0, other=3) : i32[37, 5]{5, 1}@device
return %1
)");
  EXPECT_FALSE(by_constant) << src2;
  auto [gather, src3] = checks(R"(%0 = input 0 : i64[4, 6]{6, 1}@device
%1 = input 1 : f32[50, 8]{8, 1}@device
%2 = aten::embedding(%1, indices=%0, padding_idx=-1, scale_grad_by_freq=False, sparse=False) : f32[4, 6, 8]{48, 8, 1}@device
return %2
)");
  EXPECT_FALSE(gather) << src3;
  EXPECT_NE(src3.find("kiln::checked_index(static_cast<long long>(t"), std::string::npos) << src3;
  EXPECT_EQ(src3.find("50ll, kiln_err)"), std::string::npos) << src3;  // the check passes no flag
}

// BatchNorm in eval mode on CUDA float tensors is cuDNN's operator: it lowers to a pointwise
// kernel like ATen's inference batch norm (fused with the ReLU after it), not an extern call.
TEST(CudaLowering, InferenceCudnnBatchNormIsAKernel) {
  ir::Program p = lowering::Lowerer(ir::AtenGraph::parse(R"(%0 = input 0 : f32[2, 4, 3, 3]{36, 9, 3, 1}@device
%1 = input 1 : f32[4]{1}@device
%2 = input 2 : f32[4]{1}@device
%3 = input 3 : f32[4]{1}@device
%4 = input 4 : f32[4]{1}@device
%5, %6, %7, %8 = aten::cudnn_batch_norm(%0, weight=%1, bias=%2, running_mean=%3, running_var=%4, training=False, exponential_average_factor=0.1, epsilon=0.001) : f32[2, 4, 3, 3]{36, 9, 3, 1}@device, f32[0]{1}@device, f32[0]{1}@device, u8[0]{1}@device
%9 = aten::relu(%5) : f32[2, 4, 3, 3]{36, 9, 3, 1}@device
return %9
)"), cuda_options()).run();
  const std::string text = p.to_string();
  EXPECT_EQ(p.kernels.size(), 1u) << text;
  EXPECT_EQ(text.find("extern"), std::string::npos) << text;
  EXPECT_NE(text.find("0.001"), std::string::npos) << text;  // cuDNN's `epsilon`
}

// Per-channel values are hoisted out of a channels-last kernel's loop only where that removes two
// or more costly operations per element (hoist_channel_invariants). One batch norm's
// 1/sqrt(var + eps) stays in the loop, with the grid of one vector group per thread; so does a
// batch norm followed by a division whose quotient varies per element (one costly op hoistable,
// the division not); a batch norm times rsqrt of a per-channel vector has two hoistable, and the
// grid shrinks to an eighth.
TEST(CudaHoisting, PerChannelValuesLeaveTheLoopWhereTwoCostlyOpsGo) {
  auto generate = [](const std::string& tail) {
    const std::string t = "f32[32, 256, 56, 56]{802816, 1, 14336, 256}@device";
    std::string g = "%0 = input 0 : " + t + "\n";
    for (int i = 1; i <= 4; ++i) g += "%" + std::to_string(i) + " = input " + std::to_string(i) + " : f32[256]{1}@device\n";
    g += "%5 = input 5 : f32[1, 256, 1, 1]{256, 1, 256, 256}@device\n";  // a per-channel operand
    g += "%6, %7, %8, %9 = aten::cudnn_batch_norm(%0, weight=%1, bias=%2, running_mean=%3, running_var=%4, training=False, "
         "exponential_average_factor=0.1, epsilon=1e-05) : " + t + ", f32[0]{1}@device, f32[0]{1}@device, u8[0]{1}@device\n";
    g += tail;
    ir::Program p = lowering::Lowerer(ir::AtenGraph::parse(g), cuda_options()).run();
    schedule::plan_memory(p);
    codegen::CudaModule m = codegen::generate_cuda(p);
    return m.source.substr(m.source.find("KILN_KERNEL void")) + "\n" + codegen::launch_string(m.kernels.at(0));
  };
  const std::string t = " : f32[32, 256, 56, 56]{802816, 1, 14336, 256}@device\n";
  const std::string one = generate("return %6\n");
  EXPECT_EQ(one.find("hb = "), std::string::npos) << one;
  EXPECT_NE(one.find("grid=25088 "), std::string::npos) << one;
  const std::string varying = generate("%10 = aten::div.Tensor(%6, other=%5)" + t + "return %10\n");
  EXPECT_EQ(varying.find("hb = "), std::string::npos) << varying;
  const std::string two =
      generate("%10 = aten::rsqrt(%5) : f32[1, 256, 1, 1]{256, 1, 256, 256}@device\n%11 = aten::mul.Tensor(%6, other=%10)" + t + "return %11\n");
  EXPECT_NE(two.find("hb = (static_cast<int>(threadIdx.x) % 64) * 4;"), std::string::npos) << two;
  EXPECT_NE(two.find("grid=3136 "), std::string::npos) << two;
}

// Two layers of the same shape (mm, then a residual add and gelu): their kernels are the same
// code on other buffers, so only the first is compiled; the last one (sigmoid) differs.
TEST(CudaDedup, RepeatedLayersShareTheirKernels) {
  const char* g = R"(%0 = input 0 : f32[64, 256]{256, 1}@device
%1 = input 1 : f32[256, 256]{256, 1}@device
%2 = aten::mm(%0, %1) : f32[64, 256]{256, 1}@device
%3 = aten::add.Tensor(%2, other=%0, alpha=1) : f32[64, 256]{256, 1}@device
%4 = aten::gelu(%3, approximate='none') : f32[64, 256]{256, 1}@device
%5 = aten::mm(%4, %1) : f32[64, 256]{256, 1}@device
%6 = aten::add.Tensor(%5, other=%4, alpha=1) : f32[64, 256]{256, 1}@device
%7 = aten::gelu(%6, approximate='none') : f32[64, 256]{256, 1}@device
%8 = aten::mm(%7, %1) : f32[64, 256]{256, 1}@device
%9 = aten::sigmoid(%8) : f32[64, 256]{256, 1}@device
return %9
)";
  ir::Program p = lowering::Lowerer(ir::AtenGraph::parse(g), cuda_options()).run();
  schedule::plan_memory(p);
  codegen::CudaModule m = codegen::generate_cuda(p);
  ASSERT_EQ(m.kernels.size(), 3u) << m.source;
  const std::vector<int> same = codegen::same_kernels(m);
  EXPECT_EQ(same, (std::vector<int>{0, 0, 2}));
  EXPECT_NE(m.kernel_sources[0], m.kernel_sources[1]);  // other names and buffers
  EXPECT_EQ(codegen::canonical_kernel_text(m.kernel_sources[0], m.kernels[0].name),
            codegen::canonical_kernel_text(m.kernel_sources[1], m.kernels[1].name));
}

TEST(CudaDedup, CanonicalTextRenamesBuffersInOrderAndKeepsEverythingElse) {
  using codegen::canonical_kernel_text;
  const std::string a = "// k3 (pointwise): %5=aten::add\nKILN_KERNEL void k3(float* b7, const float* b2) { b7[0] = b2[1] + 1.5e3f; k3_scalar(); }\n";
  const std::string b = "// k9 (pointwise): %8=aten::add\nKILN_KERNEL void k9(float* b4, const float* b11) { b4[0] = b11[1] + 1.5e3f; k9_scalar(); }\n";
  EXPECT_EQ(canonical_kernel_text(a, "k3"), canonical_kernel_text(b, "k9"));
  // The same buffer twice is not two buffers; parameters in another order are another kernel.
  EXPECT_NE(canonical_kernel_text(a, "k3"), canonical_kernel_text("KILN_KERNEL void k9(float* b4, const float* b4) { b4[0] = b4[1] + 1.5e3f; k9_scalar(); }\n", "k9"));
  EXPECT_NE(canonical_kernel_text("void k1(float* b1, float* b2) { b1[0] = b2[0] - b1[0]; }", "k1"),
            canonical_kernel_text("void k2(float* b1, float* b2) { b2[0] = b1[0] - b2[0]; }", "k2"));
  // Other constants, other names (k30 is not k3's), text with quotes: different.
  EXPECT_NE(canonical_kernel_text(a, "k3"), canonical_kernel_text("KILN_KERNEL void k9(float* b4, const float* b11) { b4[0] = b11[1] + 2.5e3f; k9_scalar(); }\n", "k9"));
  EXPECT_NE(canonical_kernel_text("void k30(float* b1) {}", "k3"), canonical_kernel_text("void k40(float* b1) {}", "k4"));
  EXPECT_EQ(canonical_kernel_text("void k1() { f(\"// x\"); }", "k1"), "void k1() { f(\"// x\"); }");
  EXPECT_NE(canonical_kernel_text("void k1(bf16* b1) {}", "k1").find("bf16"), std::string::npos);
}

}  // namespace
