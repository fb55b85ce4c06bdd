// Decompiler structuring tests on hand-assembled 3.11 and 3.12 bytecode (no Python needed):
// conditions combined into and/or, if/else, loops with break/continue, and clear errors.
#include <gtest/gtest.h>

#include "frontend/bytecode/bytecode.h"
#include "frontend/decompiler/code_desc.h"

using namespace kiln::decompiler;

namespace {

struct Op {
  const char* name;
  int arg;
};

// Assembles (name, arg) pairs into co_code for a version, with zeroed inline caches.
std::vector<uint8_t> assemble(int minor, const std::vector<Op>& ops) {
  std::vector<uint8_t> out;
  for (const Op& o : ops) {
    int n = kiln::frontend::opcode_number(3, minor, o.name);
    EXPECT_GE(n, 0) << o.name;
    out.push_back(static_cast<uint8_t>(n));
    out.push_back(static_cast<uint8_t>(o.arg));
    for (int c = 0; c < kiln::frontend::opcode_caches(3, minor, n); ++c) out.push_back(0), out.push_back(0);
  }
  return out;
}

ConstDesc value(const std::string& src) {
  ConstDesc c;
  c.source = src;
  c.is_none = src == "None";
  return c;
}

CodeDesc function(int minor, const std::vector<Op>& ops, std::vector<std::string> args) {
  CodeDesc d;
  d.py_minor = minor;
  d.name = d.qualname = "f";
  d.code = assemble(minor, ops);
  d.varnames = args;
  d.localsplus = args;
  d.argcount = static_cast<int>(args.size());
  d.consts = {value("None"), value("1"), value("2")};
  return d;
}

}  // namespace

TEST(Decompiler, IfElse311) {
  // def f(a, b): if a and b: x = 1 else: x = 2; return x
  CodeDesc d = function(11, {{"RESUME", 0}, {"LOAD_FAST", 0}, {"POP_JUMP_FORWARD_IF_FALSE", 5}, {"LOAD_FAST", 1},
                              {"POP_JUMP_FORWARD_IF_FALSE", 3}, {"LOAD_CONST", 1}, {"STORE_FAST", 2},
                              {"JUMP_FORWARD", 2}, {"LOAD_CONST", 2}, {"STORE_FAST", 2}, {"LOAD_FAST", 2},
                              {"RETURN_VALUE", 0}},
                        {"a", "b", "x"});
  d.argcount = 2;
  EXPECT_EQ(decompile(d), "def f(a, b):\n    if a and b:\n        x = 1\n    else:\n        x = 2\n    return x\n");
}

TEST(Decompiler, OrCondition312) {
  // def f(a, b): if a or b: return 1; return 2
  CodeDesc d = function(12, {{"RESUME", 0}, {"LOAD_FAST", 0}, {"POP_JUMP_IF_TRUE", 2}, {"LOAD_FAST", 1},
                              {"POP_JUMP_IF_FALSE", 1}, {"RETURN_CONST", 1}, {"RETURN_CONST", 2}},
                        {"a", "b"});
  EXPECT_EQ(decompile(d), "def f(a, b):\n    if a or b:\n        return 1\n    return 2\n");
}

TEST(Decompiler, WhileTrueBreak312) {
  // def f(a): while True: if a: break; a = 1   -> return a
  CodeDesc d = function(12, {{"RESUME", 0}, {"LOAD_FAST", 0}, {"POP_JUMP_IF_FALSE", 1}, {"JUMP_FORWARD", 3},
                              {"LOAD_CONST", 1}, {"STORE_FAST", 0}, {"JUMP_BACKWARD", 6}, {"LOAD_FAST", 0},
                              {"RETURN_VALUE", 0}},
                        {"a"});
  EXPECT_EQ(decompile(d), "def f(a):\n    while True:\n        if a:\n            break\n        a = 1\n    return a\n");
}

TEST(Decompiler, ConditionalExpression311) {
  // def f(a, b): return 1 if a else b
  CodeDesc d = function(11, {{"RESUME", 0}, {"LOAD_FAST", 0}, {"POP_JUMP_FORWARD_IF_FALSE", 2}, {"LOAD_CONST", 1},
                              {"JUMP_FORWARD", 1}, {"LOAD_FAST", 1}, {"RETURN_VALUE", 0}},
                        {"a", "b"});
  EXPECT_EQ(decompile(d), "def f(a, b):\n    return 1 if a else b\n");
}

TEST(Decompiler, UnsupportedIsAClearError) {
  // GET_AWAITABLE without the SEND loop of an `await`
  CodeDesc d = function(12, {{"RESUME", 0}, {"LOAD_FAST", 0}, {"GET_AWAITABLE", 0}, {"RETURN_CONST", 0}}, {"a"});
  d.flags = kCoCoroutine;
  try {
    decompile(d);
    FAIL() << "expected DecompileError";
  } catch (const DecompileError& e) {
    EXPECT_NE(std::string(e.what()).find("await"), std::string::npos) << e.what();
  }
}

TEST(Decompiler, ChainedComparison311) {
  // def f(a, b, c): if a < b < c: return 1; return 2  (the cleanup POP_TOP pops the middle operand)
  CodeDesc d = function(11, {{"RESUME", 0}, {"LOAD_FAST", 0}, {"LOAD_FAST", 1}, {"SWAP", 2}, {"COPY", 2},
                              {"COMPARE_OP", 0}, {"POP_JUMP_FORWARD_IF_FALSE", 6}, {"LOAD_FAST", 2}, {"COMPARE_OP", 0},
                              {"POP_JUMP_FORWARD_IF_FALSE", 5}, {"JUMP_FORWARD", 2}, {"POP_TOP", 0}, {"JUMP_FORWARD", 2},
                              {"LOAD_CONST", 1}, {"RETURN_VALUE", 0}, {"LOAD_CONST", 2}, {"RETURN_VALUE", 0}},
                        {"a", "b", "c"});
  EXPECT_EQ(decompile(d), "def f(a, b, c):\n    if a < b < c:\n        return 1\n    return 2\n");
}

TEST(Decompiler, ChainedComparisonValue312) {
  // def f(a, b, c): return a < b <= c  (3.12: the value form repeats its consumer after the cleanup)
  CodeDesc d = function(12, {{"RESUME", 0}, {"LOAD_FAST", 0}, {"LOAD_FAST", 1}, {"SWAP", 2}, {"COPY", 2},
                              {"COMPARE_OP", 2}, {"COPY", 1}, {"POP_JUMP_IF_FALSE", 5}, {"POP_TOP", 0},
                              {"LOAD_FAST", 2}, {"COMPARE_OP", 26}, {"RETURN_VALUE", 0}, {"SWAP", 2},
                              {"POP_TOP", 0}, {"RETURN_VALUE", 0}},
                        {"a", "b", "c"});
  EXPECT_EQ(decompile(d), "def f(a, b, c):\n    return a < b <= c\n");
}

TEST(Decompiler, ClassBody311) {
  // class A: x = 1  (a class body: name-based locals, the __module__/__qualname__ prologue)
  CodeDesc d = function(11, {{"RESUME", 0}, {"LOAD_NAME", 0}, {"STORE_NAME", 1}, {"LOAD_CONST", 3}, {"STORE_NAME", 2},
                              {"LOAD_CONST", 1}, {"STORE_NAME", 3}, {"LOAD_CONST", 0}, {"RETURN_VALUE", 0}},
                        {});
  d.name = d.qualname = "A";
  d.flags = 0;
  d.names = {"__name__", "__module__", "__qualname__", "x"};
  ConstDesc q = value("'A'");
  q.is_str = true;
  q.str = "A";
  d.consts.push_back(q);
  EXPECT_EQ(decompile(d), "class A:\n    x = 1\n");
}
