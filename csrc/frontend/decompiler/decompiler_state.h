// Internal to the decompiler: the per-code-object state shared by the structurer (structure/:
// structurer.cpp, regions and jumps; conditions.cpp, chains.cpp, loops.cpp, try_with.cpp,
// match.cpp; comprehension/function reconstruction, functions.cpp and generics.cpp) and the stack
// effects of straight-line instructions (stack/: stack_effects.cpp, calls.cpp, stores.cpp).
#pragma once
#include <array>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "frontend/bytecode/bytecode.h"
#include "frontend/decompiler/code_desc.h"
#include "frontend/decompiler/exception_table.h"
#include "frontend/decompiler/expr.h"
#include "frontend/decompiler/stmt.h"

namespace kiln::decompiler {

using Stack = std::vector<ExP>;

struct MatchCase;

struct LoopInfo {
  std::vector<int> continue_labels;  // instruction indices a `continue` jumps to
  int break_label = -1;              // where a `break` goes (-1: none)
};

// A 3.11 JUMP_IF_TRUE/FALSE_OR_POP whose target the optimizer moved past the enclosing branch.
struct PendingExit {
  int target;
  ExP value;
  bool is_and;
};

struct RegionCtx {
  int follow = -1;                 // where control goes after falling off the region's end
  // a second label that falling off the end also reaches (an if branch whose join is the end of the
  // enclosing region: that region's follow); valid while `follow` is still follow_alt_for
  int follow_alt = -1, follow_alt_for = -2;
  const LoopInfo* loop = nullptr;  // innermost enclosing loop
  bool pure = false;               // scanning a condition atom: statements are not allowed
  int base = 0;                    // stack depth of the statement level
  bool stop_at_cond = false;       // stop before a conditional jump that leaves `base` values
  // finally blocks around this region: (handler index, first and end index of its body). Their
  // copies on the normal paths out of the try body (before return/break/continue) are skipped.
  std::vector<std::array<int, 3>> finallies;
  std::vector<PendingExit>* pending = nullptr;
  // a with block's body region: its stack, and the depth below the block's markers; the region
  // ends where the normal exit's __exit__ result is popped at that depth
  const Stack* with_stack = nullptr;
  const Stack* finally_stack = nullptr;
  int finally_end = -1;  // inside a finally block's exceptional copy: its final RERAISE 0  // a try/finally body region's stack (its base: `base`)
  int with_depth = -1;
  int loop_start = -1;  // the header of the while loop whose body this region starts  // collects PendingExits of a conditional's branch
};

// Pushes a marker that collects what the region stores into it (a for target, `except E as name`,
// `with m as name`), and returns its state.
inline std::shared_ptr<SinkState> push_sink(Stack& s, const char* label = "") {
  auto sink = std::make_shared<SinkState>();
  sink->targets = {""};
  auto marker = make_marker(ExKind::Sink, label);
  marker->sink = sink;
  s.push_back(marker);
  return sink;
}

// Whether the opcode name `s` contains `sub`.
inline bool has(const char* s, const char* sub) { return std::strstr(s, sub) != nullptr; }

// Thrown inside a pure scan when an instruction has side effects.
struct NotPure {};

class Decompiler {
 public:
  explicit Decompiler(const CodeDesc& code);
  // The function body's statements.
  std::vector<Stmt> body();
  std::vector<Stmt> structured_body();
  // Per instruction: whether control reaches it from the first instruction.
  std::vector<bool> reachable() const;

  // structurer.cpp (its compound statements: conditions.cpp, chains.cpp, loops.cpp, try_with.cpp)
  // Decompiles instructions [lo, hi). Returns the index it stopped at (hi when it fell off the
  // end, the conditional jump in stop_at_cond mode) or -1 when control left (return, raise, jump).
  int region(int lo, int hi, const RegionCtx& ctx, Stack& st, std::vector<Stmt>& out);

  // stack_effects.cpp: a straight-line instruction. Returns false if it is not one.
  bool exec(int i, Stack& st, std::vector<Stmt>& out, const RegionCtx& ctx);
  // calls.cpp: calls, f-strings, MAKE_FUNCTION, imports; stores.cpp: stores, deletes, unpacking
  // (exec's dispatch continues in these; false if the instruction is not theirs)
  bool exec_call(int i, std::string_view op, int arg, Stack& st);
  bool exec_store(int i, std::string_view op, int arg, Stack& st, std::vector<Stmt>& out, const RegionCtx& ctx);

  // functions.cpp
  std::string function_source(const FunctionInfo& fn, const std::string& name);
  std::string lambda_source(const FunctionInfo& fn);
  // `class Name(header):` and its body from the class body's code (fn.code); header: bases and
  // keywords as source
  std::string class_source(const FunctionInfo& fn, const std::string& name, const std::string& header);
  // True for a class body's code object (name-based locals, __module__/__qualname__ prologue).
  static bool is_class_body(const CodeDesc& c);
  // A name in this class body as CPython stores it (`__x` -> `_Cls__x`).
  std::string mangled(const std::string& n) const;
  ExP comprehension(const FunctionInfo& fn, const ExP& iterable, int at);
  // generics.cpp: the function or class a call of 3.12's `<generic parameters of f>` scope returns
  // (PEP 695), its type parameters and the defaults passed to the scope (`args`) in place
  ExP generic_scope_call(const FunctionInfo& scope, const std::vector<ExP>& args, int at);
  // names the generic scope's parameters (.defaults, .kwdefaults) stand for: the call's arguments
  std::vector<std::pair<std::string, ExP>> bound_locals;
  bool generic_class_ = false;  // a generic class's body, decompiled with its type parameters
  ExP inline_comprehension(const Stmt& loop, const ExP& acc, int at);

  const CodeDesc& code;
  frontend::Bytecode bc;
  std::vector<ExceptionEntry> exc;
  int minor;
  std::set<std::string> globals_declared, nonlocals_declared;
  std::string class_name;  // set while decompiling a class body
  int swap_skip_to = -1;  // set by a SWAP that rebuilt a tuple assignment: where to continue

  [[noreturn]] void fail(const std::string& what, int index) const;
  int offset(int index) const { return index >= 0 && index < bc.size() ? bc.at(index).offset : -1; }
  const std::string& name(int i) const;
  std::string local(int i) const;
  // Follows unconditional jumps and NOPs.
  int resolve(int index) const;
  bool same_label(int a, int b) const {
    return a == b || (a >= 0 && b >= 0 && (resolve(a) == resolve(b) || same_exit_block(resolve(a), resolve(b)) ||
                                          block_copy_length(resolve(a), resolve(b)) > 0));
  }
  // Two copies of one small exit block (the compiler duplicates `return None` and the like).
  bool same_exit_block(int a, int b) const;
  // The length of the block at `a` when it is an instruction-for-instruction copy of the one at `b`
  // (straight-line, ending in return, raise or reraise), else 0.
  int block_copy_length(int a, int b) const;
  bool is_cond_jump(int index) const;
  bool is_uncond_jump(int index) const;
  // raise, return or a backward jump: the instruction never falls through to the next one
  bool ends_flow(int index) const;

 private:
  int handle_cond(int i, int hi, const RegionCtx& ctx, Stack& st, std::vector<Stmt>& out, int stmt_start);
  int copied_tail_ternary(int B, int F, int hi, const RegionCtx& ctx, Stack& st, const ExP& E);
  int handle_for(int i, int hi, const RegionCtx& ctx, Stack& st, std::vector<Stmt>& out);
  int handle_while_true(int h, int hi, const RegionCtx& ctx, Stack& st, std::vector<Stmt>& out);
  int handle_try(int i, int hi, const RegionCtx& ctx, Stack& st, std::vector<Stmt>& out);
  int handle_with(int i, int hi, const RegionCtx& ctx, Stack& st, std::vector<Stmt>& out);
  int handle_async_for(int i, int hi, const RegionCtx& ctx, Stack& st, std::vector<Stmt>& out);
  // match.cpp: a match statement at a COPY 1 of a pending subject (-2: not one)
  int handle_match(int i, int hi, const RegionCtx& ctx, Stack& st, std::vector<Stmt>& out);
  bool match_pattern(int& p, bool copied, MatchCase& mc);
  bool or_pattern(int& p, MatchCase& mc);
  bool has_name(int index, const char* sub) const { return std::strstr(bc.at(index).name, sub) != nullptr; }
  int send_end(int send) const;
  // a for loop's else block (the code between its natural exit `after` and a break target X past
  // it); returns where control goes on
  int loop_else(Stmt& f, int X, int after, int hi, const RegionCtx& ctx, const Stack& st, int at);  // the index after an await/yield from's SEND loop (and END_SEND)
  int handle_jump(int i, int target, int hi, const RegionCtx& ctx, std::vector<Stmt>& out);
  int handle_value_boolop(int i, int hi, const RegionCtx& ctx, Stack& st);
  // `a < b < c` from `SWAP 2; COPY 2; COMPARE_OP` at i: pushes the chain and returns where to go on
  // (the final conditional jump of a condition, or past the value form's cleanup); -2 if no chain.
  int handle_chain(int i, int hi, const RegionCtx& ctx, Stack& st);
  bool is_compare(int index) const;
  int loop_exit_label(int lo, int hi_excl, int natural_exit, const std::vector<int>& ignore = {}) const;
  // try_with.cpp helpers
  int covering_handler(int index) const;   // handler of the innermost exception entry, or -1
  bool chain_contains(int index, int handler) const;
  // index after a copy of a finally block at i, or i; *innermost: the copy is of the innermost one
  int skip_finally_copy(int i, const RegionCtx& ctx, bool* innermost = nullptr) const;
  int body_end_ = -1;
  int body_copy_at_ = -1;  // where that normal-exit finally copy began
  // where a copy at pos of the finally block whose exceptional copy is [lo, hi) ends, or -1
  // (*tail: where the copy's branches end in copies of one return block, the first of them, else -1)
  int finally_copy_end(int lo, int hi, int pos, int* tail = nullptr) const;  // where a try/finally body ended at its finally copy (set by region)
  int handler_depth(int handler) const;
  // the jump targets out of the handlers (placed at or after hi, as 3.12 does) of the trys whose
  // protected code lies wholly in [lo, hi): where their except blocks that fall through go
  std::vector<int> inner_handler_exits(int lo, int hi) const;
  // the start of the cleanup `COPY 3; POP_EXCEPT; RERAISE 1` that ends the handler at h, or -1
  int handler_cleanup(int h) const;
  // past the handler at k (PUSH_EXC_INFO) when every range it protects lies in [lo, hi) or among
  // the handlers skipped before it, from `skipped` on (a nested handler's exit), else k
  int past_nested_handler(int k, int lo, int hi, int skipped = -1) const;
  // the target is where falling off the region's end goes (its follow, or a valid follow_alt)
  bool is_follow(const RegionCtx& ctx, int target) const;
  // index after the last range protected by `handler` (for the try starting at `from`, if known)
  int span_end(int handler, int from = -1) const;
  std::set<int> handled_try_;
  std::vector<int> cover_;          // per instruction: index into exc, or -1
 public:
  // per instruction: part of a comparison chain's cleanup (reached only from the chain's own
  // jumps, which the chain expression replaces); walked over as if absent
  std::vector<bool> skip_;
  std::set<int> chains_checked_;
  std::vector<bool> live_;  // reachable(), when a resume function's prologue jumps into the code
};

}  // namespace kiln::decompiler
