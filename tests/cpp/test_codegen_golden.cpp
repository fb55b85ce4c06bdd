// Golden tests of generated code: each graph's loop-IR program and C++ source (without the
// shared prefix header) must equal tests/cpp/data/golden/<name>.txt, so every change in fusion
// decisions, loop structure or emitted code shows up in review as a diff of these files.
// KILN_UPDATE_GOLDEN=1 rewrites them.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iterator>

#include "codegen/cpp/cpp_codegen.h"
#include "ir/aten_graph.h"
#include "lowering/lowerer.h"
#include "schedule/memory_plan.h"

using namespace kiln;

namespace {

struct Case { const char* name; const char* graph; };

const Case kCases[] = {
    {"pointwise_layer_norm", R"(%0 = input 0 : f32[64, 128]{128, 1}
%1 = input 1 : f32[128]{1}
%2 = input 2 : f32[128]{1}
%3 = aten::mul.Tensor(%0, other=%1) : f32[64, 128]{128, 1}
%4 = aten::add.Tensor(%3, other=%2, alpha=1) : f32[64, 128]{128, 1}
%5 = aten::gelu(%4, approximate='none') : f32[64, 128]{128, 1}
%6 = aten::add.Tensor(%5, other=%0, alpha=1) : f32[64, 128]{128, 1}
%7, %8, %9 = aten::native_layer_norm(%6, normalized_shape=[128], weight=%1, bias=%2, eps=1e-05) : f32[64, 128]{128, 1}, f32[64, 1]{1, 1}, f32[64, 1]{1, 1}
return %7
)"},
    {"masked_softmax", R"(%0 = input 0 : f32[2, 4, 16, 16]{1024, 256, 16, 1}
%1 = aten::ones(size=[16, 16], dtype=b8, layout=None, device=None, pin_memory=False) : b8[16, 16]{16, 1}
%2 = aten::tril(%1, diagonal=0) : b8[16, 16]{16, 1}
%3 = aten::bitwise_not(%2) : b8[16, 16]{16, 1}
%4 = aten::masked_fill.Scalar(%0, mask=%3, value=-inf) : f32[2, 4, 16, 16]{1024, 256, 16, 1}
%5 = aten::_softmax(%4, dim=-1, half_to_float=False) : f32[2, 4, 16, 16]{1024, 256, 16, 1}
return %5
)"},
    {"mlp_with_externs", R"(%0 = input 0 : f32[32, 64]{64, 1}
%1 = input 1 : f32[64, 64]{64, 1}
%2 = input 2 : f32[64]{1}
%3 = aten::mm(%0, mat2=%1) : f32[32, 64]{64, 1}
%4 = aten::add.Tensor(%3, other=%2, alpha=1) : f32[32, 64]{64, 1}
%5 = aten::relu(%4) : f32[32, 64]{64, 1}
%6 = aten::mm(%5, mat2=%1) : f32[32, 64]{64, 1}
%7 = aten::add.Tensor(%6, other=%2, alpha=1) : f32[32, 64]{64, 1}
%8 = aten::tanh(%7) : f32[32, 64]{64, 1}
return %8
)"},
    {"column_sum_and_argmax_bf16", R"(%0 = input 0 : bf16[100, 24]{24, 1}
%1 = aten::sum.dim_IntList(%0, dim=[0], keepdim=False, dtype=None) : bf16[24]{1}
%2 = aten::argmax(%0, dim=1, keepdim=True) : i64[100, 1]{1, 1}
return %1, %2
)"},
    {"embedding_cat_transpose", R"(%0 = input 0 : i64[4, 6]{6, 1}
%1 = input 1 : f32[50, 8]{8, 1}
%2 = aten::embedding(%1, indices=%0, padding_idx=-1, scale_grad_by_freq=False, sparse=False) : f32[4, 6, 8]{48, 8, 1}
%3 = aten::transpose.int(%2, dim0=1, dim1=2) : f32[4, 8, 6]{48, 1, 8}
%4 = aten::sigmoid(%3) : f32[4, 8, 6]{48, 1, 8}
%5 = aten::cat([%4, %3], dim=2) : f32[4, 8, 12]{96, 12, 1}
return %5
)"},
    // RoPE: cos/sin of [t, d] read once per batch row and head; computed once, not per reader.
    {"rope_cos_sin_realized", R"(%0 = input 0 : f32[2, 4, 8, 16]{512, 128, 16, 1}
%1 = input 1 : f32[8, 16]{16, 1}
%2 = aten::cos(%1) : f32[8, 16]{16, 1}
%3 = aten::sin(%1) : f32[8, 16]{16, 1}
%4 = aten::mul.Tensor(%0, other=%2) : f32[2, 4, 8, 16]{512, 128, 16, 1}
%5 = aten::mul.Tensor(%0, other=%3) : f32[2, 4, 8, 16]{512, 128, 16, 1}
%6 = aten::add.Tensor(%4, other=%5, alpha=1) : f32[2, 4, 8, 16]{512, 128, 16, 1}
return %6
)"},
};

std::string read(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

class Golden : public ::testing::TestWithParam<Case> {};

TEST_P(Golden, ProgramAndCodeMatch) {
  const Case& c = GetParam();
  ir::Program p = lowering::Lowerer(ir::AtenGraph::parse(c.graph)).run();
  schedule::plan_memory(p);
  std::string code = codegen::generate_cpp(p, 1).at(0);
  const std::string prefix = codegen::prefix_header();
  ASSERT_EQ(code.compare(0, prefix.size(), prefix), 0);
  const std::string actual = "# program\n" + p.to_string() + "\n# code\n" + code.substr(prefix.size());
  const std::string path = std::string(KILN_TEST_DATA) + "/golden/" + c.name + ".txt";
  if (const char* u = std::getenv("KILN_UPDATE_GOLDEN"); u && *u == '1') {
    std::ofstream(path) << actual;
    GTEST_SKIP() << "rewrote " << path;
  }
  const std::string expected = read(path);
  ASSERT_FALSE(expected.empty()) << "missing " << path << " (run with KILN_UPDATE_GOLDEN=1)";
  EXPECT_EQ(actual, expected) << "generated code changed; review and run with KILN_UPDATE_GOLDEN=1";
}

INSTANTIATE_TEST_SUITE_P(Graphs, Golden, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
