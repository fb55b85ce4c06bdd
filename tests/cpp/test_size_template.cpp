// Runtime sizes (ir/size_template.h), IR in, IR out: programs lowered from one ATen graph at
// several sizes are fitted into a template over size symbols, checked at other sizes, and
// generated as kernels that read the sizes at run time.
#include <gtest/gtest.h>

#include <string>

#include "codegen/cpp/cpp_codegen.h"
#include "ir/aten_graph.h"
#include "ir/size_template.h"
#include "lowering/lowerer.h"
#include "schedule/memory_plan.h"

using namespace kiln;

namespace {

ir::Program lower(const std::string& text) {
  ir::AtenGraph g = ir::AtenGraph::parse(text);
  ir::Program p = lowering::Lowerer(g, {}).run();
  schedule::plan_memory(p);
  return p;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
  return s;
}

// Softmax over the last dim of x[2, T, 16] plus a row sum: T is the dynamic size. `T`, `T16`
// (16*T) in the text stand for the size and the stride.
const char* kRows = R"(%0 = input 0 : f32[2, T, 16]{T16, 16, 1}
%1 = aten::_softmax(%0, dim=-1, half_to_float=False) : f32[2, T, 16]{T16, 16, 1}
%2 = aten::sum.dim_IntList(%0, dim=[-1], keepdim=True) : f32[2, T, 1]{T, 1, 1}
%3 = aten::add.Tensor(%1, other=%2, alpha=1) : f32[2, T, 16]{T16, 16, 1}
return %3
)";

ir::Program rows_at(int64_t t) {
  std::string text = replace_all(kRows, "T16", std::to_string(16 * t));
  return lower(replace_all(text, "T", std::to_string(t)));
}

// A transpose of x[T, 5] reduced over T: T is the reduced extent and a stride.
const char* kColumns = R"(%0 = input 0 : f32[T, 5]{5, 1}
%1 = aten::permute(%0, dims=[1, 0]) : f32[5, T]{1, 5}
%2 = aten::exp(%1) : f32[5, T]{1, 5}
%3 = aten::sum.dim_IntList(%2, dim=[-1], keepdim=False) : f32[5]{1}
return %3
)";

ir::Program columns_at(int64_t t) { return lower(replace_all(kColumns, "T", std::to_string(t))); }

}  // namespace

TEST(SizeTemplate, FitsPolynomialsOfTheSizes) {
  std::vector<std::vector<int64_t>> s = {{5}, {7}, {9}};
  EXPECT_EQ(ir::fit_polynomial(s, {16, 16, 16})->str(), "16");
  EXPECT_EQ(ir::fit_polynomial(s, {80, 112, 144})->str(), "16*s0");
  EXPECT_EQ(ir::fit_polynomial(s, {4, 6, 8})->str(), "s0 - 1");
  EXPECT_EQ(ir::fit_polynomial(s, {100, 196, 324})->str(), "4*s0*s0");
  EXPECT_FALSE(ir::fit_polynomial(s, {2, 3, 4}));  // (s0 - 1) // 2: no polynomial
  // Two symbols: the product of a batch and a length.
  std::vector<std::vector<int64_t>> st = {{2, 5}, {3, 7}, {4, 7}};
  EXPECT_EQ(ir::fit_polynomial(st, {10 * 64, 21 * 64, 28 * 64})->str(), "64*s0*s1");
}

TEST(SizeTemplate, ProgramsAtThreeSizesShareATemplate) {
  ir::Program a = rows_at(5), b = rows_at(7), c = rows_at(9);
  std::string why;
  auto t = ir::fit_template({{5}, {7}, {9}}, {ir::program_ints(a), ir::program_ints(b), ir::program_ints(c)}, &why);
  ASSERT_TRUE(t) << why;
  EXPECT_EQ(t->num_symbols, 1);
  EXPECT_GT(t->num_symbolic, 0);
  // Another size's own program is the template at that size; a program lowered at one size is
  // not the template at another.
  ir::Program d = rows_at(33);
  EXPECT_TRUE(ir::matches(*t, ir::program_ints(d), {33}, &why)) << why;
  EXPECT_FALSE(ir::matches(*t, ir::program_ints(d), {34}, &why));
  EXPECT_NE(why.find("the template says"), std::string::npos) << why;
}

TEST(SizeTemplate, KernelsSpellTheSizes) {
  ir::Program a = rows_at(5), b = rows_at(7), c = rows_at(9);
  std::string why;
  auto t = ir::fit_template({{5}, {7}, {9}}, {ir::program_ints(a), ir::program_ints(b), ir::program_ints(c)}, &why);
  ASSERT_TRUE(t) << why;
  const ir::ProgramInts ints = ir::program_ints(c);
  auto spelling = ir::spell_ints(*t, ints, &why);
  ASSERT_TRUE(spelling) << why;
  codegen::SizeSymbols sizes{*spelling, 1};
  const std::string code = codegen::generate_cpp(c, 1, 0, &sizes)[0].substr(codegen::prefix_header().size());
  EXPECT_NE(code.find("const int64_t s0 = kiln_sizes[0];"), std::string::npos) << code;
  EXPECT_NE(code.find("< (s0)"), std::string::npos) << code;       // a loop over the length
  EXPECT_NE(code.find("(16*s0)*x0"), std::string::npos) << code;   // the batch stride
  EXPECT_EQ(code.find("< 9;"), std::string::npos) << code;         // no extent of the sample left
  EXPECT_EQ(code.find("144"), std::string::npos) << code;          // nor its stride
  // The static code of the same program is unchanged: no size table, literals only.
  const std::string fixed = codegen::generate_cpp(c)[0];
  EXPECT_EQ(fixed.find("kiln_sizes"), std::string::npos);
  EXPECT_NE(fixed.find("144*x0"), std::string::npos) << fixed;
}

TEST(SizeTemplate, ReductionsOverASymbolicExtent) {
  ir::Program a = columns_at(6), b = columns_at(11), c = columns_at(17);
  std::string why;
  auto t = ir::fit_template({{6}, {11}, {17}}, {ir::program_ints(a), ir::program_ints(b), ir::program_ints(c)}, &why);
  ASSERT_TRUE(t) << why;
  auto spelling = ir::spell_ints(*t, ir::program_ints(c), &why);
  ASSERT_TRUE(spelling) << why;
  codegen::SizeSymbols sizes{*spelling, 1};
  const std::string code = codegen::generate_cpp(c, 1, 0, &sizes)[0].substr(codegen::prefix_header().size());
  // The reduced extent is the runtime size, vector blocks then a scalar tail over it.
  EXPECT_NE(code.find("base + 64 <= (s0)"), std::string::npos) << code;
  EXPECT_NE(code.find("base < (s0)"), std::string::npos) << code;
  EXPECT_TRUE(ir::matches(*t, ir::program_ints(columns_at(100)), {100}, &why)) << why;
}

TEST(SizeTemplate, DifferentLoweringIsNoTemplate) {
  // The same graph at T = 1 loses a loop (size-1 dims are not looped over): no common shape.
  ir::Program a = rows_at(5), b = rows_at(7), one = rows_at(1);
  std::string why;
  EXPECT_FALSE(ir::fit_template({{5}, {7}, {1}}, {ir::program_ints(a), ir::program_ints(b), ir::program_ints(one)}, &why));
  EXPECT_NE(why.find("lowering differs"), std::string::npos) << why;
}

TEST(SizeTemplate, TextRoundTripsForTheCache) {
  ir::Program a = rows_at(5), b = rows_at(7), c = rows_at(9);
  std::string why;
  auto t = ir::fit_template({{5}, {7}, {9}}, {ir::program_ints(a), ir::program_ints(b), ir::program_ints(c)}, &why);
  ASSERT_TRUE(t) << why;
  auto back = ir::parse_template(ir::template_text(*t));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->shape, t->shape);
  ASSERT_EQ(back->ints.size(), t->ints.size());
  for (size_t i = 0; i < t->ints.size(); ++i) EXPECT_EQ(back->ints[i].str(), t->ints[i].str());
  EXPECT_TRUE(ir::matches(*back, ir::program_ints(rows_at(21)), {21}, &why)) << why;
  // A damaged entry is no template.
  EXPECT_FALSE(ir::parse_template("kiln-sizes 1 1 2\n3 0 1\n"));
  EXPECT_FALSE(ir::parse_template("garbage"));
}

TEST(SizeTemplate, IndexSpelling) {
  // 16*x0 + x1 with the coefficient spelled as a size expression; literals print as before.
  ir::Index e = ir::add(ir::mul(ir::Index::var(0), 16), ir::Index::var(1));
  EXPECT_EQ(e.to_string(nullptr), "16*x0 + x1");
  ir::IntSpelling sp;
  sp[&e.terms[0].first] = "(16*s0)";
  EXPECT_EQ(e.to_string(&sp), "(16*s0)*x0 + x1");
  sp[&e.constant] = "(s0 - 1)";
  EXPECT_EQ(e.to_string(&sp), "(16*s0)*x0 + x1 + (s0 - 1)");
}

// The size symbols of calls: one per column of sizes that differs between calls, positions that
// always agree (a square attention mask's two lengths) sharing it; enough once each took three values.
TEST(SizeTemplate, SymbolPositionsFromCallSizes) {
  const std::vector<int64_t> a{2, 5, 8, 5}, b{2, 7, 8, 7}, c{2, 9, 8, 9}, d{3, 9, 8, 9};
  bool enough = false;
  EXPECT_EQ(ir::symbol_positions({&a, &b, &c}, &enough), (std::vector<int>{1}));
  EXPECT_TRUE(enough);
  EXPECT_EQ(ir::symbol_positions({&a, &b, &c, &d}, &enough), (std::vector<int>{0, 1}));
  EXPECT_FALSE(enough);  // the batch took two values only
  EXPECT_EQ(ir::symbol_positions({&a, &b}, &enough), (std::vector<int>{1}));
  EXPECT_FALSE(enough);
  EXPECT_TRUE(ir::symbol_positions({&a, &a, &a}, &enough).empty());
}

TEST(SizeTemplate, SymbolValuesAndFactorsOfTwo) {
  EXPECT_EQ(ir::symbol_values({1, 3}, {2, 24, 8, 24}), (std::vector<int64_t>{24, 24}));
  EXPECT_EQ(ir::fewest_twos({24, 16}), 3);  // 24 = 8 * 3
  EXPECT_EQ(ir::fewest_twos({24, 9}), 0);
  EXPECT_EQ(ir::fewest_twos({}), 64);
}
