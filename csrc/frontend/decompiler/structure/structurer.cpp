// Structuring: walks instruction ranges with a symbolic stack and rebuilds Python's control flow
// from CPython 3.11/3.12's layouts. This file owns the region walk (Decompiler::region), the
// jump predicates and labels it reads (conditional/unconditional jumps, copies of one exit block)
// and break/continue. Conditions and conditional expressions are in conditions.cpp, comparison
// chains in chains.cpp, for/while/async-for loops in loops.cpp, try/except/finally and with
// blocks (found from the exception table) in try_with.cpp, match statements in match.cpp.
#include <algorithm>
#include <cstring>

#include "frontend/decompiler/decompiler_state.h"

namespace kiln::decompiler {

bool Decompiler::is_cond_jump(int index) const {
  const char* n = bc.at(index).name;
  return has(n, "POP_JUMP") && has(n, "_IF_");
}

bool Decompiler::ends_flow(int index) const {
  const char* n = bc.at(index).name;
  return !std::strcmp(n, "RAISE_VARARGS") || !std::strcmp(n, "RETURN_VALUE") || !std::strcmp(n, "RETURN_CONST") ||
         !std::strcmp(n, "JUMP_BACKWARD");
}

bool Decompiler::is_uncond_jump(int index) const {
  const char* n = bc.at(index).name;
  return !std::strcmp(n, "JUMP_FORWARD") || !std::strcmp(n, "JUMP_BACKWARD") || !std::strcmp(n, "JUMP_BACKWARD_NO_INTERRUPT");
}

bool Decompiler::same_exit_block(int a, int b) const {
  if (a < 0 || b < 0 || a >= bc.size() || b >= bc.size()) return false;
  for (int q = 0; q < 8 && a + q < bc.size() && b + q < bc.size(); ++q) {
    const auto &x = bc.at(a + q), &y = bc.at(b + q);
    if (x.opcode != y.opcode || x.arg != y.arg || x.target >= 0) return false;
    if (!std::strcmp(x.name, "RETURN_VALUE") || !std::strcmp(x.name, "RETURN_CONST")) return true;
    if (std::strncmp(x.name, "LOAD_", 5) && std::strcmp(x.name, "NOP")) return false;
  }
  return false;
}

int Decompiler::block_copy_length(int a, int b) const {
  if (a < 0 || b < 0 || a == b) return 0;
  for (int q = 0; q < 64 && a + q < bc.size() && b + q < bc.size(); ++q) {
    const auto &x = bc.at(a + q), &y = bc.at(b + q);
    if (x.opcode != y.opcode || x.arg != y.arg || x.target >= 0 || y.target >= 0) return 0;
    if (!std::strcmp(x.name, "RETURN_VALUE") || !std::strcmp(x.name, "RETURN_CONST") || !std::strcmp(x.name, "RAISE_VARARGS") ||
        !std::strcmp(x.name, "RERAISE"))
      return q + 1;
  }
  return 0;
}

int Decompiler::resolve(int index) const {
  for (int guard = 0; guard < 64 && index >= 0 && index < bc.size(); ++guard) {
    const char* n = bc.at(index).name;
    if (is_uncond_jump(index)) { index = bc.at(index).target; continue; }
    if (!std::strcmp(n, "NOP") || skip_[index]) { ++index; continue; }
    break;
  }
  return index;
}

bool Decompiler::is_follow(const RegionCtx& ctx, int target) const {
  return (ctx.follow >= 0 && same_label(target, ctx.follow)) ||
         (ctx.follow_alt >= 0 && ctx.follow_alt_for == ctx.follow && same_label(target, ctx.follow_alt));
}

int Decompiler::handle_jump(int i, int target, int hi, const RegionCtx& ctx, std::vector<Stmt>& out) {
  if (is_follow(ctx, target)) return hi;
  if (ctx.loop) {
    for (int c : ctx.loop->continue_labels)
      if (same_label(target, c)) {
        Stmt s = line("continue");
        s.kind = Stmt::Kind::Continue;
        out.push_back(s);
        return -1;
      }
    if (ctx.loop->break_label >= 0 && same_label(target, ctx.loop->break_label)) {
      Stmt s = line("break");
      s.kind = Stmt::Kind::Break;
      out.push_back(s);
      return -1;
    }
  }
  if (target == hi) return hi;
  fail("a jump that is neither break, continue nor the end of a block", i);
}

int Decompiler::loop_exit_label(int lo, int hi_excl, int natural_exit, const std::vector<int>& ignore) const {
  int found = -1;
  for (int j = lo; j < hi_excl; ++j) {
    const auto& in = bc.at(j);
    if (in.target < 0 || !std::strcmp(in.name, "FOR_ITER") || !std::strcmp(in.name, "SEND")) continue;
    if (in.target >= lo - 1 && in.target < hi_excl) continue;
    if (std::find(ignore.begin(), ignore.end(), in.target) != ignore.end()) continue;
    if (natural_exit >= 0 && same_label(in.target, natural_exit)) continue;
    if (in.target < lo && in.target >= 0) {
      // a backward jump out of the loop: a break threaded to an enclosing loop's header
    }
    if (found < 0) found = in.target;
    else if (!same_label(found, in.target)) fail("a loop with more than one exit", j);
  }
  return found < 0 ? natural_exit : found;
}

int Decompiler::region(int lo, int hi, const RegionCtx& ctx, Stack& st, std::vector<Stmt>& out) {
  int i = lo;
  int stmt_start = lo;
  while (i < hi) {
    if (skip_[i]) {
      ++i;
      continue;
    }
    if (static_cast<int>(st.size()) <= ctx.base) stmt_start = i;
    const frontend::Instruction& in = bc.at(i);
    const char* n = in.name;
    // 3.12: an await's CLEANUP_THROW (and its jump back to END_SEND) is reached only through the
    // exception table; where it sits among the code that follows, it is no statement
    if (!std::strcmp(n, "CLEANUP_THROW") && !ctx.pure) {
      i += (i + 1 < hi && is_uncond_jump(i + 1) && has(bc.at(i + 1).name, "BACKWARD")) ? 2 : 1;
      continue;
    }
    if (!std::strcmp(n, "SWAP")) {
      int r = handle_chain(i, hi, ctx, st);
      if (r != -2) {
        i = r;
        continue;
      }
    }
    if (!ctx.pure) {
      int r = handle_try(i, hi, ctx, st, out);
      if (r <= -3) {  // a try body's end: its normal-exit finally copy
        body_end_ = -3 - r;
        return -3 - r;
      }
      if (r != -2) {
        if (r < 0) return -1;
        i = r;
        continue;
      }
    }
    if (!ctx.pure && static_cast<int>(st.size()) == ctx.base && std::strcmp(n, "FOR_ITER") && i != ctx.loop_start) {
      bool header = false;
      int L = -1;
      // (not the end of an except clause: 3.12 places handlers after the code the try continues at)
      // (nor a with block's handler: POP_EXCEPT; POP_TOP; POP_TOP; JUMP_BACKWARD to after the block)
      auto except_exit = [&](int j) {
        return (j >= 1 && !std::strcmp(bc.at(j - 1).name, "POP_EXCEPT")) ||
               (j >= 3 && !std::strcmp(bc.at(j - 3).name, "POP_EXCEPT") && !std::strcmp(bc.at(j - 2).name, "POP_TOP") &&
                !std::strcmp(bc.at(j - 1).name, "POP_TOP")) ||
               (j >= 4 && !std::strcmp(bc.at(j - 4).name, "POP_EXCEPT") && !std::strncmp(bc.at(j - 1).name, "DELETE_", 7));
      };
      // (nor the exit of a guarded while loop whose final test 3.12 placed after the handlers,
      // `POP_JUMP_IF_x j; JUMP_BACKWARD body; j: JUMP_BACKWARD exit`, the body before the exit: a
      // while True loop's back edge after a nested loop's final test goes back before that loop)
      auto moved_while_exit = [&](int j) {
        return j >= 2 && is_uncond_jump(j - 1) && has(bc.at(j - 1).name, "BACKWARD") && bc.at(j - 1).target < bc.at(j).target &&
               is_cond_jump(j - 2) && bc.at(j - 2).target == j;
      };
      for (int j = i; j < hi; ++j)
        if (bc.at(j).target == i && (is_uncond_jump(j) || is_cond_jump(j)) && has(bc.at(j).name, "BACKWARD") && !except_exit(j) &&
            !moved_while_exit(j))
          header = true, L = j;
      // a `continue` of a guarded while jumps to the guard: the loop's own back edge (to the
      // body, after the guard) comes later
      for (int j = L + 1; header && j < hi; ++j)
        if (has(bc.at(j).name, "BACKWARD") && bc.at(j).target > i && bc.at(j).target <= L && !except_exit(j)) header = false;
      if (header) {
        int r = handle_while_true(i, hi, ctx, st, out);
        if (r < 0) return -1;
        i = r;
        continue;
      }
    }
    if (!ctx.pure && (!std::strcmp(n, "COPY") || (!std::strncmp(n, "LOAD_", 5) && static_cast<int>(st.size()) == ctx.base + 1))) {
      int r = handle_match(i, hi, ctx, st, out);
      if (r != -2) {
        if (r < 0) return -1;
        i = r;
        continue;
      }
    }
    if (is_cond_jump(i)) {
      if (st.empty()) fail("conditional jump with an empty stack", i);
      if (ctx.stop_at_cond && static_cast<int>(st.size()) - 1 == ctx.base) return i;
      int r = handle_cond(i, hi, ctx, st, out, stmt_start);
      if (r < 0) return -1;
      i = r;
      continue;
    }
    if (!std::strcmp(n, "JUMP_IF_FALSE_OR_POP") || !std::strcmp(n, "JUMP_IF_TRUE_OR_POP")) {
      i = handle_value_boolop(i, hi, ctx, st);
      continue;
    }
    if (is_uncond_jump(i)) {
      int t = bc.at(i).target, q = i + 1;
      while (q < t && skip_[q]) ++q;
      if (t > i + 1 && q == t && t <= hi) {  // a jump over a comparison chain's cleanup
        i = t;
        continue;
      }
      // a jump over code nothing reaches: a resume function that continues inside an if/elif
      // chain jumps over the chain's other branches
      if (t > i + 1 && t <= hi && !live_.empty()) {
        bool dead = true;
        for (int k = i + 1; k < t && dead; ++k) dead = !live_[k];
        if (dead) {
          i = t;
          continue;
        }
      }
      if (ctx.pure) throw NotPure{};
      return handle_jump(i, in.target, hi, ctx, out);
    }
    // compound statements that start at one instruction: for, async for, with, async with
    using Compound = int (Decompiler::*)(int, int, const RegionCtx&, Stack&, std::vector<Stmt>&);
    const bool async_for = (!std::strcmp(n, "GET_AITER") && i + 1 < bc.size() && !std::strcmp(bc.at(i + 1).name, "GET_ANEXT")) ||
                           (!std::strcmp(n, "GET_ANEXT") && !st.empty() &&
                            ((st.back()->kind == ExKind::Iter && st.back()->name == "<aiter>") ||
                             (st.back()->kind == ExKind::Name && st.back()->text == ".0")));
    Compound compound = !std::strcmp(n, "FOR_ITER")  ? &Decompiler::handle_for
                        : async_for ? &Decompiler::handle_async_for
                        : (!std::strcmp(n, "BEFORE_WITH") || !std::strcmp(n, "BEFORE_ASYNC_WITH")) ? &Decompiler::handle_with
                                                                                                     : nullptr;
    if (compound) {
      if (ctx.pure) throw NotPure{};
      int r = (this->*compound)(i, hi, ctx, st, out);
      if (r < 0) return -1;
      i = r;
      continue;
    }
    if (!std::strcmp(n, "GET_AWAITABLE")) {
      // GET_AWAITABLE; LOAD_CONST None; SEND end; YIELD_VALUE; RESUME; JUMP_BACKWARD_NO_INTERRUPT; end: [END_SEND]
      if (i + 2 >= bc.size() || std::strcmp(bc.at(i + 1).name, "LOAD_CONST") || std::strcmp(bc.at(i + 2).name, "SEND"))
        fail("GET_AWAITABLE outside `await`", i);
      if (st.empty()) fail("await with an empty stack", i);
      if (in.arg == 0 && st.back()->name == "<asynccomp>") {
        // 3.11: an async comprehension's code is a coroutine its caller awaits; the source has no await
      } else if (in.arg == 0) {
        ExP v = st.back();
        st.pop_back();
        auto e = make_ex("await " + wrap(v, kPrecAwait + 1), kPrecAwait);
        e->a = v;
        st.push_back(e);
      } else if (st.back()->kind != ExKind::Dummy) {  // 2: awaiting __aexit__'s result (a with block's exit)
        fail("await of an async with's exit outside its block", i);
      }
      i = send_end(i + 2);
      continue;
    }
    if (!std::strcmp(n, "RETURN_VALUE") || !std::strcmp(n, "RETURN_CONST")) {
      if (ctx.pure) throw NotPure{};
      ExP v;
      if (n[7] == 'C') v = const_ex(code.consts.at(in.arg));
      else {
        if (st.empty()) fail("return with an empty stack", i);
        v = st.back();
        st.pop_back();
        if (!class_name.empty() && v->kind == ExKind::Dummy && v->text == "__class__") return -1;  // class body's end
      }
      Stmt s;
      s.kind = Stmt::Kind::Return;
      s.e1 = v;
      if (v->kind == ExKind::Function && v->fn->code->name != "<lambda>") {
        out.push_back(line(function_source(*v->fn, v->fn->code->name)));
        s.text = "return " + v->fn->code->name;
      } else {
        s.text = v->kind == ExKind::Const && v->cst && v->cst->is_none ? "return None" : "return " + wrap(v, kPrecTuple);
        if (v->name == "<yield>") s.text = "return (" + v->text + ")";
      }
      out.push_back(s);
      return -1;
    }
    // a branch of a finally block's exceptional copy ending (RERAISE 0) where the block ends: it
    // goes on where the branch's statement goes on, the end of the finally block
    if (!std::strcmp(n, "RERAISE") && in.arg == 0 && ctx.finally_end >= 0 && i != ctx.finally_end &&
        ctx.follow == ctx.finally_end) {
      if (ctx.pure) throw NotPure{};
      return hi;
    }
    if (!std::strcmp(n, "RAISE_VARARGS")) {
      if (ctx.pure) throw NotPure{};
      Stmt s;
      s.kind = Stmt::Kind::Raise;
      if (static_cast<int>(st.size()) < in.arg) fail("raise with a short stack", i);
      if (in.arg == 0) s.text = "raise";
      else if (in.arg == 1) {
        s.e1 = st.back();
        st.pop_back();
        s.text = "raise " + wrap(s.e1, kPrecTuple + 1);
      } else {
        ExP cause = st.back();
        st.pop_back();
        s.e1 = st.back();
        st.pop_back();
        s.text = "raise " + wrap(s.e1, kPrecTuple + 1) + " from " + wrap(cause, kPrecTuple + 1);
      }
      out.push_back(s);
      return -1;
    }
    if (!std::strcmp(n, "GET_YIELD_FROM_ITER")) {
      if (ctx.pure) throw NotPure{};
      // GET_YIELD_FROM_ITER; LOAD_CONST None; SEND end; YIELD_VALUE; RESUME; JUMP_BACKWARD_NO_INTERRUPT; end: [END_SEND]
      if (i + 2 >= bc.size() || std::strcmp(bc.at(i + 1).name, "LOAD_CONST") || std::strcmp(bc.at(i + 2).name, "SEND"))
        fail("GET_YIELD_FROM_ITER outside `yield from`", i);
      if (st.empty()) fail("yield from with an empty stack", i);
      ExP v = st.back();
      st.pop_back();
      auto e = make_ex("yield from " + wrap(v, kPrecOr), kPrecYield);
      e->name = "<yield>";
      e->a = v;
      st.push_back(e);
      i = send_end(i + 2);
      continue;
    }
    // inside a finally block's exceptional copy, a RERAISE 0 before its last ends a branch there
    // (the end of a try body or except clause nested in the finally block): it goes to the end
    if (!std::strcmp(n, "RERAISE") && in.arg == 0 && ctx.finally_end >= 0 && i != ctx.finally_end) {
      if (ctx.pure) throw NotPure{};
      return handle_jump(i, ctx.finally_end, hi, ctx, out);
    }
    // the end of a with block's body: the exit call's result popped at the depth below the block
    const bool exit_result = !std::strcmp(n, "POP_TOP") && !st.empty() && st.back()->kind == ExKind::Dummy &&
                             st.back()->text == "<exit>";
    swap_skip_to = -1;
    if (!exec(i, st, out, ctx)) fail(std::string("unsupported instruction ") + n, i);
    if (swap_skip_to >= 0) {
      i = swap_skip_to;
      swap_skip_to = -1;
      continue;
    }
    ++i;
    if (exit_result && ctx.with_stack == &st && static_cast<int>(st.size()) == ctx.with_depth) return i;
  }
  return hi;
}

}  // namespace kiln::decompiler
