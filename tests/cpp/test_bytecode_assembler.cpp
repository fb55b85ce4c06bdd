// Bytecode assembly: the recorded 3.11/3.12 fixtures round-trip through disassemble/assemble
// byte for byte (EXTENDED_ARG jumps included); exception and location tables; resume prologues.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "frontend/bytecode/bytecode_assembler.h"

using namespace kiln::frontend;

static std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

class AssembleFixture : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(AssembleFixture, RoundTripsByteForByte) {
  auto [name, minor] = GetParam();
  std::string code = read_file(std::string(KILN_TEST_DATA) + "/" + name + ".3" + std::to_string(minor) + ".bin");
  ASSERT_FALSE(code.empty());
  Bytecode bc(reinterpret_cast<const uint8_t*>(code.data()), code.size(), 3, minor);
  std::vector<uint8_t> again = assemble(disassemble(bc), 3, minor);
  EXPECT_EQ(std::string(again.begin(), again.end()), code);
}

INSTANTIATE_TEST_SUITE_P(BothVersions, AssembleFixture,
                         ::testing::Combine(::testing::Values("straight", "loops", "closures", "big_jumps", "with_super"),
                                            ::testing::Values(11, 12)));

TEST(Assembler, WidensJumpsThatNeedExtendedArg) {
  const int nop = opcode_number(3, 12, "NOP"), jf = opcode_number(3, 12, "JUMP_FORWARD"), ext = opcode_number(3, 12, "EXTENDED_ARG");
  std::vector<AsmInstruction> code = {{jf, 0, 301}};
  for (int i = 0; i < 300; ++i) code.push_back({nop, 0, -1});
  code.push_back({nop, 0, -1});
  std::vector<int> unit_of;
  auto bytes = assemble(code, 3, 12, &unit_of);
  ASSERT_EQ(bytes[0], ext);  // 300 units to skip: one EXTENDED_ARG prefix
  EXPECT_EQ(unit_of[1], 2);
  Bytecode bc(bytes.data(), bytes.size(), 3, 12);
  EXPECT_EQ(bc.at(0).target, 301);
  EXPECT_EQ(bc.at(0).arg, 300);
}

TEST(Assembler, RejectsJumpsWithoutATarget) {
  const int jf = opcode_number(3, 11, "JUMP_FORWARD"), jb = opcode_number(3, 11, "JUMP_BACKWARD"), nop = opcode_number(3, 11, "NOP");
  EXPECT_THROW(assemble({{jf, 0, 5}}, 3, 11), std::invalid_argument);
  EXPECT_THROW(assemble({{jb, 0, 2}, {nop, 0, -1}, {nop, 0, -1}}, 3, 11), std::invalid_argument);  // backward opcode, forward target
}

TEST(ExceptionTable, EncodesAndParsesBack) {
  std::vector<ExceptionEntry> entries = {{2, 10, 14, 1, true}, {20, 5000, 70000, 3, false}, {0, 1, 2, 0, false}};
  auto bytes = encode_exception_table(entries);
  auto back = parse_exception_table(bytes.data(), bytes.size());
  ASSERT_EQ(back.size(), entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    EXPECT_EQ(back[i].start, entries[i].start);
    EXPECT_EQ(back[i].end, entries[i].end);
    EXPECT_EQ(back[i].target, entries[i].target);
    EXPECT_EQ(back[i].depth, entries[i].depth);
    EXPECT_EQ(back[i].lasti, entries[i].lasti);
  }
  uint8_t truncated[] = {0x80 | 0x40};
  EXPECT_THROW(parse_exception_table(truncated, 1), std::invalid_argument);
}

TEST(LocationTable, NoLocationEntriesCoverThePrologue) {
  uint8_t original[] = {0xd8, 0x00};
  auto t = prepend_no_location(original, 2, 11);
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t[0], 0xF8 | 7);  // 8 units
  EXPECT_EQ(t[1], 0xF8 | 2);  // 3 units
  EXPECT_EQ(t[2], 0xd8);
}

class ResumeFixture : public ::testing::TestWithParam<int> {};

TEST_P(ResumeFixture, PrologueRebuildsStateThenJumpsIntoTheUnchangedBody) {
  const int minor = GetParam();
  std::string code = read_file(std::string(KILN_TEST_DATA) + "/loops.3" + std::to_string(minor) + ".bin");
  Bytecode bc(reinterpret_cast<const uint8_t*>(code.data()), code.size(), 3, minor);
  ResumeLayout layout;
  layout.target = bc.size() / 2;
  layout.first_carrier = 7;
  layout.stack_null = {true, false, false};
  layout.unbound = {2};
  // One exception entry over the whole body: it must move with the code.
  std::vector<ExceptionEntry> exc = {{0, static_cast<int>(code.size() / 2), 1, 0, false}};
  auto exc_bytes = encode_exception_table(exc);
  uint8_t lines[] = {0xd8, 0x00};
  ResumeCode r = build_resume_code(bc, exc_bytes.data(), exc_bytes.size(), lines, 2, layout, 3, minor);
  Bytecode out(r.code.data(), r.code.size(), 3, minor);
  const char* expect[] = {"RESUME", "PUSH_NULL", "LOAD_FAST", "LOAD_FAST", "DELETE_FAST", "JUMP_FORWARD"};
  for (int i = 0; i < 6; ++i) EXPECT_STREQ(out.at(i).name, expect[i]);
  EXPECT_EQ(out.at(2).arg, 7);
  EXPECT_EQ(out.at(3).arg, 8);
  EXPECT_EQ(out.at(4).arg, 2);
  EXPECT_EQ(out.at(5).target, 6 + layout.target);
  const int shift = out.at(6).start_offset;
  EXPECT_EQ(std::string(r.code.begin() + shift, r.code.end()), code);
  auto moved = parse_exception_table(r.exception_table.data(), r.exception_table.size());
  ASSERT_EQ(moved.size(), 1u);
  EXPECT_EQ(moved[0].start, shift / 2);
  EXPECT_EQ(moved[0].target, 1 + shift / 2);
  EXPECT_EQ(r.line_table.back(), 0x00);
}

INSTANTIATE_TEST_SUITE_P(BothVersions, ResumeFixture, ::testing::Values(11, 12));
