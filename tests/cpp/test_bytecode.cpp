// Bytecode decoding, checked against CPython's own `dis` listings recorded from 3.11 and 3.12
// (tests/cpp/data, made by tools/gen_bytecode_fixtures.py).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "frontend/bytecode/bytecode.h"

using kiln::frontend::Bytecode;

static std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

class DecodeFixture : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(DecodeFixture, MatchesDis) {
  auto [name, minor] = GetParam();
  std::string base = std::string(KILN_TEST_DATA) + "/" + name + ".3" + std::to_string(minor);
  std::string code = read_file(base + ".bin");
  ASSERT_FALSE(code.empty()) << base;
  Bytecode bc(reinterpret_cast<const uint8_t*>(code.data()), code.size(), 3, minor);
  EXPECT_EQ(bc.to_string(), read_file(base + ".txt"));
}

INSTANTIATE_TEST_SUITE_P(BothVersions, DecodeFixture,
                         ::testing::Combine(::testing::Values("straight", "loops", "closures", "big_jumps", "with_super"),
                                            ::testing::Values(11, 12)));

TEST(Bytecode, ExtendedArgFoldsIntoOneInstruction) {
  std::string code = read_file(std::string(KILN_TEST_DATA) + "/big_jumps.311.bin");
  Bytecode bc(reinterpret_cast<const uint8_t*>(code.data()), code.size(), 3, 11);
  bool saw_wide_jump = false;
  for (const auto& in : bc.instructions()) {
    if (in.target >= 0 && in.start_offset != in.offset) {
      saw_wide_jump = true;
      EXPECT_GT(in.arg, 255);
      EXPECT_EQ(bc.index_of_offset(in.start_offset), in.index);
    }
  }
  EXPECT_TRUE(saw_wide_jump);
}

TEST(Bytecode, RejectsBadInput) {
  uint8_t odd[3] = {1, 0, 1};
  EXPECT_THROW(Bytecode(odd, 3, 3, 11), std::invalid_argument);
  uint8_t ok[2] = {1, 0};
  EXPECT_THROW(Bytecode(ok, 2, 3, 9), std::invalid_argument);
  // A forward jump past the end is malformed.
  int jf = kiln::frontend::opcode_number(3, 12, "JUMP_FORWARD");
  uint8_t bad[2] = {static_cast<uint8_t>(jf), 50};
  EXPECT_THROW(Bytecode(bad, 2, 3, 12), std::invalid_argument);
}

TEST(Bytecode, BinaryOpNames) {
  uint8_t ok[2] = {1, 0};
  Bytecode bc(ok, 2, 3, 12);
  EXPECT_STREQ(bc.binary_op_name(0), "NB_ADD");
  EXPECT_STREQ(bc.binary_op_name(13), "NB_INPLACE_ADD");
  EXPECT_STREQ(bc.binary_op_name(99), "");
}
