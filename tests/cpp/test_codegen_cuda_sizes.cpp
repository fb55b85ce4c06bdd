// CUDA kernels for runtime sizes (codegen/cuda, issue 10 item 3), no GPU needed: programs lowered
// for CUDA at three sizes are fitted into a size template; the kernels generated from it take the
// sizes as parameters (golden source in tests/cpp/data/golden_cuda/runtime_sizes.txt, compiled by
// nvcc where it is on the PATH), and cuda_sized_launches says how they run a program at another
// size: vector kernel or scalar twin, the launch of that size, or not at all.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include "codegen/cuda/cuda_codegen.h"
#include "ir/aten_graph.h"
#include "ir/size_template.h"
#include "lowering/lowerer.h"
#include "schedule/memory_plan.h"

using namespace kiln;

namespace {

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
  return s;
}

std::string read(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// Attention scores softmaxed over a length T (a runtime size that is also the row stride), and
// a [T, 96] activation through gelu and a layer norm (T rows of a static length). `L` stands for
// T and `LL` for T*T in the text.
const char* kGraph = R"(%0 = input 0 : f32[4, L, L]{LL, L, 1}@device
%1 = input 1 : f32[L, 96]{96, 1}@device
%2 = input 2 : f32[96]{1}@device
%3 = aten::_softmax(%0, dim=-1, half_to_float=False) : f32[4, L, L]{LL, L, 1}@device
%4 = aten::mul.Tensor(%1, other=%2) : f32[L, 96]{96, 1}@device
%5 = aten::gelu(%4, approximate='tanh') : f32[L, 96]{96, 1}@device
%6, %7, %8 = aten::native_layer_norm(%5, normalized_shape=[96], weight=%2, bias=%2, eps=1e-05) : f32[L, 96]{96, 1}@device, f32[L, 1]{1, 1}@device, f32[L, 1]{1, 1}@device
return %3, %6
)";

ir::Program at(int64_t t) {
  lowering::LoweringOptions o;
  o.cuda = true;
  std::string text = replace_all(kGraph, "LL", std::to_string(t * t));
  ir::Program p = lowering::Lowerer(ir::AtenGraph::parse(replace_all(text, "L", std::to_string(t))), o).run();
  schedule::plan_memory(p);
  return p;
}

struct Fixture {
  ir::Program a = at(8), b = at(12), c = at(16);
  ir::SizeTemplate t;
  codegen::CudaModule m;
  Fixture() {
    std::string why;
    auto fit = ir::fit_template({{8}, {12}, {16}}, {ir::program_ints(a), ir::program_ints(b), ir::program_ints(c)}, &why);
    EXPECT_TRUE(fit) << why;
    t = *fit;
    auto spelling = ir::spell_ints(t, ir::program_ints(c), &why);
    EXPECT_TRUE(spelling) << why;
    const codegen::CudaSizes sizes{*spelling, t.num_symbols};
    m = codegen::generate_cuda(c, true, &sizes);  // autotuning is off for runtime sizes
  }
  // How the kernels run the program at size T (nullopt: not served), `why` set when not.
  std::optional<std::vector<codegen::CudaSizedLaunch>> launches(const ir::Program& p, int64_t size, std::string* why) const {
    if (!ir::matches(t, ir::program_ints(p), {size}, why)) return std::nullopt;
    auto spelling = ir::spell_ints(t, ir::program_ints(p), why);
    if (!spelling) return std::nullopt;
    return codegen::cuda_sized_launches(m.kernels, p, {*spelling, t.num_symbols}, why);
  }
};

}  // namespace

TEST(CudaRuntimeSizes, KernelsTakeTheSizesAsParameters) {
  Fixture f;
  const std::string prefix = codegen::cuda_prefix_header();
  std::string actual = "# launches at T=16\n";
  for (const auto& k : f.m.kernels) {
    actual += codegen::launch_string(k) + "\n";
    EXPECT_EQ(k.symbols, 1);
    EXPECT_TRUE(k.alternatives.empty());
    EXPECT_FALSE(k.text.empty());
  }
  const std::string code = f.m.source.substr(prefix.size());
  actual += "\n# code\n" + code;
  EXPECT_NE(code.find("int* __restrict__ kiln_err, const int s0)"), std::string::npos) << code;
  EXPECT_EQ(code.find("< 16;"), std::string::npos) << code;   // no extent of the sample left
  EXPECT_EQ(code.find("256*x"), std::string::npos) << code;   // nor its T*T stride
  EXPECT_NE(code.find("<= (s0)"), std::string::npos) << code;  // a vector loop with a tail over T
  const std::string path = std::string(KILN_TEST_DATA) + "/golden_cuda/runtime_sizes.txt";
  if (const char* u = std::getenv("KILN_UPDATE_GOLDEN"); u && *u == '1') {
    std::ofstream(path) << actual;
  } else {
    const std::string expected = read(path);
    ASSERT_FALSE(expected.empty()) << "missing " << path << " (run with KILN_UPDATE_GOLDEN=1)";
    EXPECT_EQ(actual, expected) << "generated CUDA changed; review and run with KILN_UPDATE_GOLDEN=1";
  }
  // The static code of the same program is unchanged: literals, no size parameters.
  const codegen::CudaModule fixed = codegen::generate_cuda(f.c);
  EXPECT_EQ(fixed.source.find("const int s0"), std::string::npos);
  EXPECT_TRUE(fixed.kernels[0].text.empty());
  if (std::system("nvcc --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "nvcc not found: generated source not compiled";
  const std::string cu = std::string(::testing::TempDir()) + "kiln_runtime_sizes.cu";
  std::ofstream(cu) << f.m.source;
  const std::string cmd = "nvcc -arch=sm_90 -cubin -std=c++17 -o " + cu + ".cubin " + cu + " > " + cu + ".log 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << read(cu + ".log");
}

TEST(CudaRuntimeSizes, OtherSizesRunWithTheirOwnLaunches) {
  Fixture f;
  std::string why;
  // A multiple of four: every kernel as generated, launched for 40 rows of scores per head.
  auto l40 = f.launches(at(40), 40, &why);
  ASSERT_TRUE(l40) << why;
  ASSERT_EQ(l40->size(), f.m.kernels.size());
  for (const auto& l : *l40) EXPECT_TRUE(l.vector);
  auto l16 = f.launches(f.c, 16, &why);
  ASSERT_TRUE(l16) << why;
  for (size_t k = 0; k < f.m.kernels.size(); ++k) {
    EXPECT_EQ((*l16)[k].launch.grid, f.m.kernels[k].launch.grid) << k;  // the sample's own launch
    EXPECT_GE((*l40)[k].launch.grid, (*l16)[k].launch.grid) << k;
  }
  // An odd length: the scores' rows start off a vector boundary, so their kernel runs as its
  // scalar twin; the layer norm's rows (96 floats) keep their vector code.
  auto l13 = f.launches(at(13), 13, &why);
  ASSERT_TRUE(l13) << why;
  int scalar = 0;
  for (const auto& l : *l13) scalar += l.vector ? 0 : 1;
  EXPECT_GE(scalar, 1);
  EXPECT_LT(scalar, static_cast<int>(l13->size()));
  // A program lowered at one size is not served at another's symbols.
  EXPECT_FALSE(f.launches(at(13), 14, &why));
}

// A row of a runtime length is cached in registers as a static row is (one pass over memory for
// softmax's max, sum and output), in a fixed number of groups per thread that the register budget
// allows: the kernel runs that body where the row fits and a plain one for longer rows, the same
// code at every size (dyn_seq's masked softmax read its scores three times at runtime sizes).
TEST(CudaRuntimeSizes, RowsOfARuntimeLengthAreCachedWhereTheyFit) {
  Fixture f;
  const std::string softmax = f.m.kernels.at(0).text;
  // float rows, groups of 4: 32 bytes a group (the load and the exponentials), 8 groups a lane.
  EXPECT_NE(softmax.find("if ((((s0) + 3) / 4) <= 256) {  // the row fits the row cache"), std::string::npos) << softmax;
  EXPECT_NE(softmax.find("kiln::Vec<float, 4> rc0[8];  // row cache"), std::string::npos) << softmax;
  EXPECT_NE(softmax.find("if (g < ((s0) / 4)) {"), std::string::npos) << softmax;  // full groups prefetched
  EXPECT_NE(softmax.find("} else {\n    float r0_0;"), std::string::npos) << softmax;   // the plain body
  EXPECT_NE(softmax.find("for (int g = lane; g < (((s0) + 3) / 4); g += 32)"), std::string::npos) << softmax;
  // The static kernel of the same program keeps its literal cache and has one body.
  const codegen::CudaModule fixed = codegen::generate_cuda(f.c);
  EXPECT_EQ(fixed.source.find("the row fits"), std::string::npos);
  EXPECT_NE(fixed.source.find("rc0[1];  // row cache"), std::string::npos);
  // Rows longer than the cache (2000 floats) run the same kernel (its plain body).
  std::string why;
  auto l = f.launches(at(2000), 2000, &why);
  ASSERT_TRUE(l) << why;
  EXPECT_TRUE((*l)[0].vector);
}
