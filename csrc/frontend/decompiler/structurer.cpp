// Structuring: walks instruction ranges with a symbolic stack and rebuilds Python's control flow
// from CPython 3.11/3.12's layouts. Conditions made of several conditional jumps are combined
// into and/or expressions by their jump targets; a conditional whose branches leave one more
// value on the stack is a conditional expression; FOR_ITER ranges are for loops; a guard
// condition repeated at the end of its body is a while loop; other backward jumps are
// `while True` loops; jumps to a loop's exit or header are break/continue. try/except/finally
// and with blocks are found from the exception table (try_with.cpp).
#include <algorithm>
#include <cstring>

#include "frontend/decompiler/decompiler_state.h"

namespace kiln::decompiler {

namespace {

bool has(const char* s, const char* sub) { return std::strstr(s, sub) != nullptr; }

// Whether a loop body (nested blocks included) appends to `target`: a comprehension's loop
// builds the list/set/dict just below its iterator on the stack.
bool appends_to(const std::vector<Stmt>& body, const ExP& target) {
  for (const Stmt& s : body) {
    if (s.kind == Stmt::Kind::Append && !s.is_yield && s.e3 == target) return true;
    if (appends_to(s.body, target)) return true;
    for (const auto& c : s.clauses)
      if (appends_to(c.body, target)) return true;
  }
  return false;
}

ExP and_or(const ExP& x, const ExP& y, bool is_and) {
  if (is_and && x->kind == ExKind::Compare && y->kind == ExKind::Compare && !x->operands.empty() &&
      !y->operands.empty() && x->operands.back() == y->operands.front() && !y->b) {
    auto e = make_ex("", kPrecCompare, ExKind::Compare);
    e->operands = x->operands;
    e->ops = x->ops;
    for (size_t k = 1; k < y->operands.size(); ++k) e->operands.push_back(y->operands[k]);
    for (auto& o : y->ops) e->ops.push_back(o);
    std::string t = wrap(e->operands[0], kPrecCompare + 1);
    for (size_t k = 0; k < e->ops.size(); ++k) t += " " + e->ops[k] + " " + wrap(e->operands[k + 1], kPrecCompare + 1);
    e->text = t;
    return e;
  }
  int p = is_and ? kPrecAnd : kPrecOr;
  return make_ex(wrap(x, p) + (is_and ? " and " : " or ") + wrap(y, p), p);
}

struct Atom {
  int start, jump, target;
  ExP cond;          // the condition the jump tests
  bool jump_if_true;
};

}  // namespace

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

int Decompiler::handle_jump(int i, int target, int hi, const RegionCtx& ctx, std::vector<Stmt>& out) {
  if (ctx.follow >= 0 && same_label(target, ctx.follow)) return hi;
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
      auto except_exit = [&](int j) {
        return (j >= 1 && !std::strcmp(bc.at(j - 1).name, "POP_EXCEPT")) ||
               (j >= 4 && !std::strcmp(bc.at(j - 4).name, "POP_EXCEPT") && !std::strncmp(bc.at(j - 1).name, "DELETE_", 7));
      };
      for (int j = i; j < hi; ++j)
        if (bc.at(j).target == i && (is_uncond_jump(j) || is_cond_jump(j)) && has(bc.at(j).name, "BACKWARD") && !except_exit(j))
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
    if (!ctx.pure && !std::strcmp(n, "COPY")) {
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

int Decompiler::send_end(int j) const {
  if (j >= bc.size() || std::strcmp(bc.at(j).name, "SEND")) fail("SEND expected", j);
  int end = bc.at(j).target;
  if (end < bc.size() && !std::strcmp(bc.at(end).name, "END_SEND")) ++end;
  return end;
}

int Decompiler::handle_async_for(int i, int hi, const RegionCtx& ctx, Stack& st, std::vector<Stmt>& out) {
  // GET_AITER; h: GET_ANEXT; LOAD_CONST None; SEND; ...; [END_SEND]; <store target>; body;
  // JUMP_BACKWARD h; [3.12: CLEANUP_THROW blocks]; H: END_ASYNC_FOR (the handler of GET_ANEXT's range)
  // (or, in an async comprehension, h itself: GET_ANEXT over the iterator the comprehension was
  // given, `.0` in 3.11, or the inlined GET_AITER's in 3.12)
  if (st.empty()) fail("async for with an empty stack", i);
  const bool comp_iter = !std::strcmp(bc.at(i).name, "GET_ANEXT");
  const int h = comp_iter ? i : i + 1;
  if (h + 2 >= bc.size() || std::strcmp(bc.at(h).name, "GET_ANEXT") || std::strcmp(bc.at(h + 2).name, "SEND"))
    fail("GET_AITER outside `async for`", i);
  const int H = covering_handler(h);
  if (H < 0 || std::strcmp(bc.at(H).name, "END_ASYNC_FOR")) fail("async for without END_ASYNC_FOR", i);
  int L = -1;
  for (int j = h; j < H; ++j)
    if (is_uncond_jump(j) && bc.at(j).target == h) L = j;
  if (L < 0) fail("async for without its back edge", i);
  // 3.12 may move END_ASYNC_FOR (and the else block after it, which jumps back) past the code
  // that follows the loop
  bool moved = false;
  for (int j = L + 1; j < H; ++j) moved |= std::strcmp(bc.at(j).name, "CLEANUP_THROW") && !is_uncond_jump(j);
  ExP iterable = st.back();
  if (comp_iter && iterable->kind == ExKind::Iter) iterable = iterable->a;
  st.pop_back();
  const int after = moved ? L + 1 : H + 1;
  LoopInfo info;
  info.continue_labels = {h};
  const int X = loop_exit_label(h, L + 1, after);
  if (moved && !same_label(X, after)) fail("async for whose break target is not after it", i);
  info.break_label = X;
  RegionCtx bctx = ctx;
  bctx.follow = h;
  bctx.loop = &info;
  bctx.base = static_cast<int>(st.size()) + 1;
  bctx.stop_at_cond = false;
  Stack sb = st;
  sb.push_back(make_marker(ExKind::Dummy));  // the async iterator
  auto sink = push_sink(sb);
  Stmt f;
  f.kind = Stmt::Kind::For;
  region(send_end(h + 2), L, bctx, sb, f.body);
  if (!sink->filled) fail("async for whose target is not stored", i);
  f.target = sink->targets[0];
  f.e1 = iterable;
  f.text = "async for " + f.target + " in " + wrap(iterable, kPrecLambda + 1);
  if (comp_iter) {
    // the loop of an async comprehension: it appends to the list/set/dict just below its iterator
    const bool appends = !st.empty() && appends_to(f.body, st.back());
    if (appends) {
      // a comprehension has no break; its loop ends at END_ASYNC_FOR (3.12 may place other
      // comprehensions' cleanup code between the back edge and it)
      const int end = H + 1;
      st.back() = inline_comprehension(f, st.back(), i);
      // (3.12 jumps from END_ASYNC_FOR over the comprehension's cleanup handler to the code after it)
      if (end < bc.size() && !std::strcmp(bc.at(end).name, "JUMP_FORWARD") && bc.at(end).target > end && bc.at(end).target <= hi)
        return bc.at(end).target;
      return end;
    }
    // (else an async generator expression's loop, which yields: a statement its caller rebuilds)
  }
  if (moved) {  // the else block after the moved END_ASYNC_FOR jumps back to `after`
    Stmt::Clause c{"else", {}};
    RegionCtx ectx = ctx;
    ectx.follow = after;
    Stack s2 = st;
    region(H + 1, bc.size(), ectx, s2, c.body);
    if (!c.body.empty()) f.clauses.push_back(c);
    out.push_back(f);
    return after;
  }
  const int next = loop_else(f, X, after, hi, ctx, st, i);
  out.push_back(f);
  return next;
}

int Decompiler::loop_else(Stmt& f, int X, int after, int hi, const RegionCtx& ctx, const Stack& st, int at) {
  if (same_label(X, after)) return after;
  // a break goes past the code after the loop's natural exit: that code is the loop's else block
  int else_end, next;
  if (X <= hi && X > after) else_end = next = X;
  else if (ctx.follow >= 0 && same_label(X, ctx.follow)) else_end = next = hi;
  else fail("loop whose break target is not after its else block", at);
  Stmt::Clause c{"else", {}};
  RegionCtx ectx = ctx;
  ectx.follow = next;
  Stack s2 = st;
  region(after, else_end, ectx, s2, c.body);
  f.clauses.push_back(c);
  return next;
}

bool Decompiler::is_compare(int index) const {
  const char* n = bc.at(index).name;
  return !std::strcmp(n, "COMPARE_OP") || !std::strcmp(n, "IS_OP") || !std::strcmp(n, "CONTAINS_OP");
}

int Decompiler::handle_chain(int i, int hi, const RegionCtx& ctx, Stack& st) {
  auto at = [&](int j, const char* n, int arg = -1) {
    return j < bc.size() && !std::strcmp(bc.at(j).name, n) && (arg < 0 || bc.at(j).arg == arg);
  };
  auto triple = [&](int j) { return at(j, "SWAP", 2) && at(j + 1, "COPY", 2) && j + 2 < bc.size() && is_compare(j + 2); };
  if (!triple(i) || st.size() < 2) return -2;
  // one comparison's operator, applied to the two values below it
  auto compare = [&](int j, const ExP& l, const ExP& r) {
    Stack s{l, r};
    std::vector<Stmt> none;
    if (!exec(j, s, none, ctx) || s.size() != 1 || s[0]->kind != ExKind::Compare) fail("comparison chain", j);
    return s[0];
  };
  // the jump after each comparison but the last: statement form POP_JUMP_IF_FALSE C; value form
  // JUMP_IF_FALSE_OR_POP C (3.11) or COPY 1; POP_JUMP_IF_FALSE C; POP_TOP (3.12)
  bool value_form = false;
  int C = -1;
  auto middle_jump = [&](int p) {
    int j = p, len = 1;
    bool v = false;
    if (at(p, "JUMP_IF_FALSE_OR_POP")) v = true;
    else if (at(p, "COPY", 1) && p + 2 < bc.size() && is_cond_jump(p + 1) && has(bc.at(p + 1).name, "FALSE") &&
             !has(bc.at(p + 1).name, "NONE") && at(p + 2, "POP_TOP"))
      v = true, j = p + 1, len = 3;
    else if (!(is_cond_jump(p) && has(bc.at(p).name, "FALSE") && !has(bc.at(p).name, "NONE"))) fail("comparison chain without its jump", p);
    if (C < 0) C = bc.at(j).target, value_form = v;
    else if (C != bc.at(j).target || v != value_form) fail("comparison chain with jumps to different places", p);
    return p + len;
  };
  ExP b = st.back();
  st.pop_back();
  ExP a = st.back();
  st.pop_back();
  ExP E = compare(i + 2, a, b);
  int p = middle_jump(i + 3);
  for (;;) {
    // the next operand ends at the next SWAP 2; COPY 2; compare, or at the last comparison
    // (the first candidate whose code before it is one expression)
    int q = p;
    Stack s2;
    for (;; ++q) {
      if (q >= hi) fail("comparison chain without its end", i);
      if (!triple(q) && !(is_compare(q) && q + 1 < bc.size() &&
                          (value_form || (is_cond_jump(q + 1) && !has(bc.at(q + 1).name, "NONE")))))
        continue;
      s2 = st;
      RegionCtx c2 = ctx;
      c2.pure = false;  // an operand may call; it must not leave statements
      c2.stop_at_cond = false;
      c2.base = static_cast<int>(st.size());
      c2.follow = -1;
      std::vector<Stmt> tmp;
      try {
        if (region(p, q, c2, s2, tmp) == q && s2.size() == st.size() + 1 && tmp.empty()) break;
      } catch (const DecompileError&) {
      }
    }
    ExP link = compare(triple(q) ? q + 2 : q, E->operands.back(), s2.back());
    auto chained = make_ex("", kPrecCompare, ExKind::Compare);
    chained->operands = E->operands;
    chained->ops = E->ops;
    chained->operands.push_back(link->operands[1]);
    chained->ops.push_back(link->ops[0]);
    std::string t = wrap(chained->operands[0], kPrecCompare + 1);
    for (size_t k = 0; k < chained->ops.size(); ++k) t += " " + chained->ops[k] + " " + wrap(chained->operands[k + 1], kPrecCompare + 1);
    chained->text = t;
    E = chained;
    if (triple(q)) {
      p = middle_jump(q + 3);
      continue;
    }
    p = q + 1;
    break;
  }
  if (value_form) {
    // JUMP_FORWARD end; C: SWAP 2; POP_TOP; end:  or (3.12) the code using the value, then
    // C: SWAP 2; POP_TOP; a copy of that code
    if (!at(C, "SWAP", 2) || !at(C + 1, "POP_TOP") || C < p) fail("comparison chain value of an unexpected shape", p);
    if (is_uncond_jump(p) && C == p + 1 && bc.at(p).target == C + 2) {
      st.push_back(E);
      return C + 2;
    }
    const int len = C - p;
    for (int q = 0; q < len; ++q) {
      const auto &x = bc.at(p + q), &y = C + 2 + q < bc.size() ? bc.at(C + 2 + q) : bc.at(p + q);
      if (C + 2 + q >= bc.size() || x.opcode != y.opcode || x.arg != y.arg || x.target >= 0 || is_cond_jump(p + q))
        fail("comparison chain value of an unexpected shape", p);
    }
    for (int q = C; q < C + 2 + len; ++q) skip_[q] = true;
    st.push_back(E);
    return p;
  }
  // statement form: p is the final conditional jump; the cleanup at C pops the middle operand and
  // goes where the chain's false outcome goes
  if (!at(C, "POP_TOP") || C <= p) fail("comparison chain cleanup of an unexpected shape", C);
  int D = C + 1;
  if (C + 1 < bc.size() && is_uncond_jump(C + 1)) D = bc.at(C + 1).target;
  bool jump_if_true = has(bc.at(p).name, "TRUE");
  if (!chains_checked_.count(i)) {  // checked before any skip marks change what labels resolve to
    int FT = p + 1;
    if (p + 1 < bc.size() && is_uncond_jump(p + 1) && C == p + 2 && bc.at(p + 1).target > C) FT = bc.at(p + 1).target;
    int false_outcome = jump_if_true ? FT : bc.at(p).target;
    int copy_len = 0;
    if (!same_label(D, false_outcome)) {
      // 3.12 gives the cleanup its own copy of a small block that ends the false outcome (a raise,
      // a return): the same instructions, reached from the cleanup alone, skipped like the cleanup
      copy_len = D == C + 1 ? block_copy_length(D, false_outcome) : 0;
      for (int j = 0; j < bc.size() && copy_len > 0; ++j)
        if (bc.at(j).target > C && bc.at(j).target < D + copy_len) copy_len = 0;
      if (copy_len <= 0) fail("comparison chain whose failing middle test goes elsewhere", C);
      for (int j = D; j < D + copy_len; ++j) skip_[j] = true;
    }
    chains_checked_.insert(i);
  }
  skip_[C] = true;
  if (C + 1 < bc.size() && is_uncond_jump(C + 1)) {
    bool only = true;
    for (int j = 0; j < bc.size() && only; ++j) only = bc.at(j).target != C + 1;
    if (only) skip_[C + 1] = true;
  }
  if (p + 1 < bc.size() && is_uncond_jump(p + 1) && C == p + 2 && bc.at(p + 1).target > C) {
    skip_[p + 1] = true;
    const int FT = bc.at(p + 1).target;
    // what the cleanup falls into before the true path (3.12 copies a small exit block there) is
    // reached from the cleanup alone: skipped too
    bool alone = true;
    for (int j = 0; j < bc.size() && alone; ++j)
      if ((j < p + 1 || j >= FT) && bc.at(j).target > C && bc.at(j).target < FT) alone = false;
    const char* ln = bc.at(FT - 1).name;
    bool closed = is_uncond_jump(FT - 1) || !std::strcmp(ln, "RETURN_VALUE") || !std::strcmp(ln, "RETURN_CONST") ||
                  !std::strcmp(ln, "RAISE_VARARGS") || !std::strcmp(ln, "RERAISE");
    if (alone && closed)
      for (int j = C + 1; j < FT; ++j) skip_[j] = true;
  }

  st.push_back(E);
  return p;
}

int Decompiler::handle_value_boolop(int i, int hi, const RegionCtx& ctx, Stack& st) {
  const auto& in = bc.at(i);
  bool is_and = has(in.name, "FALSE");
  if (st.empty()) fail("and/or with an empty stack", i);
  int t = in.target;
  if (t > hi && ctx.pending) {
    ctx.pending->push_back({t, st.back(), is_and});
    st.pop_back();
    return i + 1;
  }
  if (t > hi || t <= i) fail("and/or whose end lies outside its block", i);
  ExP a = st.back();
  Stack s1 = st;
  s1.pop_back();
  std::vector<Stmt> tmp;
  RegionCtx c = ctx;
  c.follow = t;
  c.stop_at_cond = false;
  c.base = static_cast<int>(s1.size());
  int r = region(i + 1, t, c, s1, tmp);
  if (r != t || s1.size() != st.size() || !tmp.empty()) fail("and/or operand with statements", i);
  st.back() = and_or(a, s1.back(), is_and);
  return t;
}

// 3.12 copies a short tail that ends in a return or raise into both branches of a conditional expression:
// `return g(x if c else y)` is `c? x; CALL; RETURN : y; CALL; RETURN`. Both branches are a value
// then the same straight-line tail: the conditional expression is rebuilt on the stack and the
// structurer goes on at the else branch's copy of the tail. -1 when the branches are not that.
int Decompiler::copied_tail_ternary(int B, int F, int hi, const RegionCtx& ctx, Stack& st, const ExP& E) {
  int end = -1;  // the else branch's return (3.12 leaves a try body's returns out of its range: hi itself)
  for (int j = F; j <= hi && j < bc.size(); ++j) {
    const char* n = bc.at(j).name;
    if (!std::strcmp(n, "RETURN_VALUE") || !std::strcmp(n, "RETURN_CONST") || !std::strcmp(n, "RAISE_VARARGS")) { end = j + 1; break; }
  }
  if (end < 0 || F - 1 < B) return -1;
  const char* last = bc.at(F - 1).name;
  if (std::strcmp(last, "RETURN_VALUE") && std::strcmp(last, "RETURN_CONST") && std::strcmp(last, "RAISE_VARARGS")) return -1;
  int common = 0;  // the longest common straight-line suffix of [B, F) and [F, end)
  while (F - 1 - common > B && end - 1 - common > F) {
    const auto &x = bc.at(F - 1 - common), &y = bc.at(end - 1 - common);
    if (x.opcode != y.opcode || x.arg != y.arg || x.target >= 0 || y.target >= 0 || skip_[F - 1 - common] ||
        skip_[end - 1 - common])
      break;
    ++common;
  }
  for (int t = common; t >= 1; --t) {  // the longest tail after which each branch is one value
    auto value = [&](int lo, int vhi) -> ExP {
      Stack sv = st;
      RegionCtx c = ctx;
      c.pure = true;
      c.stop_at_cond = false;
      c.follow = -1;
      c.base = static_cast<int>(st.size());
      std::vector<Stmt> tmp;
      try {
        if (region(lo, vhi, c, sv, tmp) != vhi || !tmp.empty() || sv.size() != st.size() + 1) return nullptr;
      } catch (const NotPure&) {
        return nullptr;
      } catch (const DecompileError&) {
        return nullptr;
      }
      for (size_t k = 0; k < st.size(); ++k)
        if (sv[k] != st[k]) return nullptr;
      return sv.back();
    };
    ExP a = value(B, F - t), b = value(F, end - t);
    if (!a || !b) continue;
    st.push_back(make_ex(wrap(a, kPrecTernary + 1) + " if " + wrap(E, kPrecTernary + 1) + " else " + wrap(b, kPrecTernary), kPrecTernary));
    return end - t;
  }
  return -1;
}

int Decompiler::handle_cond(int i, int hi, const RegionCtx& ctx, Stack& st, std::vector<Stmt>& out, int stmt_start) {
  auto sense = [&](int j, ExP c, Atom& a) {
    const char* n = bc.at(j).name;
    a.jump = j;
    a.target = bc.at(j).target;
    if (has(n, "NOT_NONE")) { a.cond = compare_ex(c, "is not", make_ex("None", kPrecAtom, ExKind::Name)); a.jump_if_true = true; }
    else if (has(n, "NONE")) { a.cond = compare_ex(c, "is", make_ex("None", kPrecAtom, ExKind::Name)); a.jump_if_true = true; }
    else { a.cond = c; a.jump_if_true = has(n, "TRUE"); }
  };
  std::vector<Atom> atoms;
  Atom first;
  first.start = stmt_start;
  sense(i, st.back(), first);
  st.pop_back();
  atoms.push_back(first);
  const int base = static_cast<int>(st.size());
  for (int p = i + 1; p < hi;) {
    Stack s2 = st;
    RegionCtx c2 = ctx;
    c2.pure = true;
    c2.stop_at_cond = true;
    c2.base = base;
    c2.follow = -1;
    std::vector<Stmt> tmp;
    int r;
    try {
      r = region(p, hi, c2, s2, tmp);
    } catch (const NotPure&) {
      break;
    } catch (const DecompileError&) {
      break;
    }
    if (r < 0 || r >= hi || !is_cond_jump(r) || static_cast<int>(s2.size()) != base + 1 || !tmp.empty()) break;
    // (an atom inside a try block that starts after the first test is that try's code, not part
    // of the condition: `if a:` then `try: if not b: ...` is no `if a and b`)
    bool same_try = true;
    for (int j = p; j <= r && same_try; ++j) same_try = cover_[j] == cover_[i] || !std::strcmp(bc.at(j).name, "NOP");
    if (!same_try) break;
    bool same_below = true;
    for (int k = 0; k < base; ++k) same_below &= s2[k] == st[k];
    if (!same_below) break;
    Atom a;
    a.start = p;
    sense(r, s2.back(), a);
    atoms.push_back(a);
    p = r + 1;
  }
  // the longest prefix whose jumps go to later atoms, its end, or one outside label
  int k = static_cast<int>(atoms.size()) - 1, B = -1, F = -1;
  for (; k >= 0; --k) {
    B = atoms[k].jump + 1;
    F = -1;
    bool ok = true;
    for (int m = 0; m <= k && ok; ++m) {
      int t = atoms[m].target;
      bool internal = t == B || (skip_[B] && resolve(t) == resolve(B));  // (B: a skipped chain cleanup jumping on)
      for (int x = m + 1; x <= k; ++x) internal |= t == atoms[x].start;
      if (internal) continue;
      if (F < 0) F = t;
      else if (!same_label(F, t)) ok = false;
    }
    if (ok && F >= 0) break;
  }
  if (k < 0) fail("condition whose jumps cannot be combined", i);
  atoms.resize(k + 1);
  auto is_start = [&](int t) {
    for (auto& a : atoms) if (a.start == t) return true;
    return false;
  };
  auto lab_eq = [&](int a, int b) { return a == b || (!is_start(a) && !is_start(b) && same_label(a, b)); };
  std::function<ExP(int, int, int, int)> build = [&](int l, int r, int S, int Fl) -> ExP {
    if (l == r) {
      const Atom& a = atoms[l];
      int ft = l == k ? B : atoms[l + 1].start;
      if (lab_eq(a.target, Fl) && lab_eq(ft, S)) return a.jump_if_true ? negate(a.cond) : a.cond;
      if (lab_eq(a.target, S) && lab_eq(ft, Fl)) return a.jump_if_true ? a.cond : negate(a.cond);
      return nullptr;
    }
    for (int m = l; m < r; ++m) {
      int next = atoms[m + 1].start;
      int kind = 0;  // 1: to Fl, 2: to S
      bool ok = true;
      for (int x = l; x <= m && ok; ++x) {
        int t = atoms[x].target;
        bool internal = t == next;
        for (int y = x + 1; y <= m; ++y) internal |= t == atoms[y].start;
        if (internal) continue;
        int kk = lab_eq(t, Fl) ? 1 : lab_eq(t, S) ? 2 : 0;
        if (!kk || (kind && kk != kind)) ok = false;
        kind = kk;
      }
      if (!ok || !kind) continue;
      ExP X = kind == 1 ? build(l, m, next, Fl) : build(l, m, S, next);
      ExP Y = build(m + 1, r, S, Fl);
      if (X && Y) return and_or(X, Y, kind == 1);
    }
    return nullptr;
  };
  ExP E = build(0, k, B, F);
  if (!E) fail("condition whose jumps cannot be combined", i);
  const int first_jump = i;

  // a guard repeated at the end of the body: a while loop
  if (!ctx.pure && base == ctx.base && F > B && F <= hi && stmt_start < B) {
    int glen = B - stmt_start, last = F - 1, tail = -1;
    if (minor == 11 && is_cond_jump(last) && bc.at(last).target == B) tail = F - glen;
    if (minor >= 12 && is_uncond_jump(last) && bc.at(last).target == B) tail = F - 1 - glen;
    // a guard with a comparison chain: its copy ends in a backward jump into the body (3.11: the
    // final test; 3.12: a JUMP_BACKWARD after it), followed by the copy's cleanup and exit path
    bool chain_guard = false;
    for (int q = stmt_start; q <= B && q < bc.size(); ++q) chain_guard |= skip_[q];
    if (tail < 0 && chain_guard) {
      int L = -1;
      for (int j = B; j < F; ++j)
        if (bc.at(j).target >= 0 && has(bc.at(j).name, "BACKWARD") && resolve(bc.at(j).target) == resolve(B)) L = j;
      if (L >= 0) {
        tail = is_uncond_jump(L) ? L - glen : L - glen + 1;
        for (int j = L + 1; j < F && tail >= B;) {
          const char* n = bc.at(j).name;
          if (!std::strcmp(n, "POP_TOP") || !std::strcmp(n, "NOP") || is_uncond_jump(j)) { ++j; continue; }
          if (!same_exit_block(j, F)) { tail = -1; break; }
          while (j < F && std::strcmp(bc.at(j).name, "RETURN_VALUE") && std::strcmp(bc.at(j).name, "RETURN_CONST")) ++j;
          ++j;
        }
      }
    }
    bool match = tail >= B;
    for (int q = 0; match && q < glen; ++q) {
      const auto &x = bc.at(stmt_start + q), &y = bc.at(tail + q);
      bool jx = is_cond_jump(stmt_start + q), jy = is_cond_jump(tail + q);
      if (jx != jy) match = false;
      else if (!jx && (x.opcode != y.opcode || x.arg != y.arg)) match = false;
    }
    if (match) {
      LoopInfo L;
      L.continue_labels = {stmt_start, tail};
      int X = loop_exit_label(B, tail, F, {stmt_start, tail});
      for (int j = tail; j < F; ++j) {  // the tail's own exits
        int t = bc.at(j).target;
        if (t >= 0 && t != B && resolve(t) != resolve(B) && (t < tail || t >= F) && !same_label(t, F) && !same_label(t, X))
          fail("while condition with a second exit", j);
      }
      L.break_label = X;
      RegionCtx bctx = ctx;
      bctx.follow = tail;
      bctx.loop = &L;
      bctx.base = base;
      Stack sb = st;
      Stmt w;
      w.kind = Stmt::Kind::While;
      w.text = "while " + wrap(E, kPrecLambda + 1);
      w.e1 = E;
      region(B, tail, bctx, sb, w.body);
      int next = F;
      if (!same_label(X, F)) {
        int else_end;
        if (X <= hi && X > F) { else_end = X; next = X; }
        else if (ctx.follow >= 0 && same_label(X, ctx.follow)) { else_end = hi; next = hi; }
        else fail("while loop whose break target is not after its else block", first_jump);
        Stmt::Clause c{"else", {}};
        RegionCtx ectx = ctx;
        ectx.follow = next;
        Stack se = st;
        int r = region(F, else_end, ectx, se, c.body);
        if (r >= 0 && se.size() != st.size()) fail("stack mismatch after while-else", F);
        w.clauses.push_back(c);
      }
      out.push_back(w);
      return next;
    }
  }

  RegionCtx sub = ctx;
  sub.stop_at_cond = false;
  sub.pure = ctx.pure;
  // the false branch leaves the block: break / continue / end of the enclosing block
  if (F <= i || F > hi) {
    if (ctx.follow >= 0 && same_label(F, ctx.follow) && !(ctx.loop && !ctx.loop->continue_labels.empty() && false)) {
      if (ctx.pure) throw NotPure{};
      Stmt s;
      s.kind = Stmt::Kind::If;
      s.text = "if " + wrap(E, kPrecLambda + 1);
      s.e1 = E;
      sub.follow = ctx.follow;
      Stack s1 = st;
      int r = region(B, hi, sub, s1, s.body);
      if (r >= 0 && s1.size() != st.size()) fail("stack mismatch in if", i);
      if (s.body.size() == 1 && s.body[0].kind == Stmt::Kind::Raise && s.body[0].e1 && s.body[0].e1->kind == ExKind::AssertError) {
        ExP msg = s.body[0].e1->a;  // `assert E2` whose failing jump is threaded to the end of an enclosing block
        out.push_back(line("assert " + wrap(negate(E), kPrecLambda + 1) + (msg ? ", " + wrap(msg, kPrecLambda + 1) : "")));
        return hi;
      }
      out.push_back(s);
      return hi;
    }
    std::vector<Stmt> jb;
    int r = handle_jump(i, F, hi, ctx, jb);
    if (r >= 0 || ctx.pure) fail("conditional jump out of a block", i);
    Stmt s;
    s.kind = Stmt::Kind::If;
    ExP NE = negate(E);
    s.text = "if " + wrap(NE, kPrecLambda + 1);
    s.e1 = NE;
    s.body = jb;
    out.push_back(s);
    return B;
  }
  int then_end = F, else_lo = -1, else_end = -1, join = F;
  int last = F - 1;
  while (last > B && skip_[last]) --last;
  // a try ending the branch: 3.11 puts its handlers after the jump that ends its body
  for (int guard = 0; guard < 16 && last > B && !std::strcmp(bc.at(last).name, "RERAISE"); ++guard) {
    int t = -1;
    for (auto& e : exc) {
      int x = bc.index_of_offset(e.target);
      if (x > B && x <= last && x > t) t = x;
    }
    if (t < 0) break;
    last = t - 1;
  }
  // (in a finally block's exceptional copy, a branch ending in RERAISE 0 goes to the block's end)
  const bool to_finally_end = last >= B && ctx.finally_end >= 0 && last != ctx.finally_end &&
                              !std::strcmp(bc.at(last).name, "RERAISE") && bc.at(last).arg == 0;
  if (last >= B && (is_uncond_jump(last) || to_finally_end)) {
    int J = to_finally_end ? ctx.finally_end : bc.at(last).target;
    if (J > F && (J < hi || (J == hi && ctx.follow >= 0 && same_label(J, ctx.follow)))) { then_end = last; else_lo = F; else_end = J; join = J; }
    else if (J > hi && ctx.follow >= 0 && same_label(J, ctx.follow)) { then_end = last; else_lo = F; else_end = hi; join = hi; }
  }
  if (else_lo < 0 && last >= B && ends_flow(last)) {
    // A then-branch that never falls through (it ends in raise, return or a loop's back edge) has
    // no jump over an else block: CPython drops the unreachable one. An else is still there when
    // jumps inside the branch go past F to one label J (an inner if's end, threaded through the
    // dropped jump): [F, J) is then reached only from the condition, the else block.
    int J = -1;
    bool ok = true;
    for (int j = B; j <= last && ok; ++j) {
      if (skip_[j] || !(is_cond_jump(j) || is_uncond_jump(j))) continue;
      const int t = bc.at(j).target;
      if (t == F) ok = false;  // the branch reaches F: F is where the if ends, not an else
      if (t <= F) continue;
      bool loop_label = false;
      if (ctx.loop) {
        loop_label = ctx.loop->break_label >= 0 && same_label(t, ctx.loop->break_label);
        for (int c : ctx.loop->continue_labels) loop_label = loop_label || same_label(t, c);
      }
      if (loop_label) continue;  // a break or continue of the enclosing loop
      if (J < 0) J = t;
      else if (!same_label(J, t)) ok = false;
    }
    // (not when F and J are copies of one exit block: 3.11 duplicates `return None` per path)
    if (ok && J > F && !same_label(F, J) && !same_exit_block(F, J)) {
      if (J < hi || (J == hi && ctx.follow >= 0 && same_label(J, ctx.follow))) { else_lo = F; else_end = J; join = J; }
      else if (J > hi && ctx.follow >= 0 && same_label(J, ctx.follow)) { else_lo = F; else_end = hi; join = hi; }
    }
  }
  sub.follow = join;
  sub.base = static_cast<int>(st.size());
  Stack s1 = st;
  std::vector<Stmt> body1, body2;
  std::vector<PendingExit> pend;
  RegionCtx tctx = sub;
  tctx.pending = &pend;
  int r1 = region(B, then_end, tctx, s1, body1);
  if (!pend.empty()) {
    // 3.11 `a and b or c` / `(a or b) and c` with the inner jump threaded past `c`
    int J = pend[0].target;
    if (pend.size() != 1 || else_lo >= 0 || r1 < 0 || s1.size() != st.size() || !body1.empty() || J > hi)
      fail("and/or whose jumps cannot be combined", i);
    Stack s2 = st;
    std::vector<Stmt> tmp;
    RegionCtx ectx = sub;
    ectx.follow = J;
    int r2 = region(F, J, ectx, s2, tmp);
    if (r2 != J || s2.size() != st.size() + 1 || !tmp.empty()) fail("and/or whose jumps cannot be combined", i);
    ExP b = pend[0].value, c = s2.back();
    ExP v = pend[0].is_and ? and_or(and_or(negate(E), b, false), c, true) : and_or(and_or(E, b, true), c, false);
    st.push_back(v);
    return J;
  }
  Stack s2 = st;
  int r2 = F;
  if (else_lo >= 0) r2 = region(else_lo, else_end, sub, s2, body2);
  const size_t n0 = st.size();
  // conditional expression: both branches leave one more value
  if (else_lo >= 0 && r1 >= 0 && r2 >= 0 && s1.size() == n0 + 1 && s2.size() == n0 + 1) {
    if (!body1.empty() || !body2.empty()) fail("statements inside a conditional expression", i);
    st.push_back(make_ex(wrap(s1.back(), kPrecTernary + 1) + " if " + wrap(E, kPrecTernary + 1) + " else " + wrap(s2.back(), kPrecTernary), kPrecTernary));
    return join;
  }
  // 3.12 value and/or: COPY 1; POP_JUMP_IF_x end; POP_TOP; <b>; end:
  if (else_lo < 0 && r1 >= 0 && s1.size() == n0 && n0 > 0 && s1.back() != st.back() && body1.empty() &&
      (E == st.back() || (E->kind == ExKind::Not && E->a == st.back()) ||
       (st.back()->kind == ExKind::Not && st.back()->a == E) ||  // `not x or y`: the test negated back to x
       (E->kind == ExKind::Compare && E->b && E->b == st.back()))) {  // (a negated `in`/`is` compare)
    bool is_and = E == st.back();
    st.back() = and_or(st.back(), s1.back(), is_and);
    return join;
  }
  if (ctx.pure) throw NotPure{};
  if ((r1 >= 0 && s1.size() != n0) || (r2 >= 0 && s2.size() != n0)) fail("branches leave different stacks", i);
  if (static_cast<int>(n0) != ctx.base) {
    int r = copied_tail_ternary(B, F, hi, ctx, st, E);
    if (r >= 0) return r;
    fail("a conditional inside an expression", i);
  }
  Stmt s;
  s.kind = Stmt::Kind::If;
  s.e1 = E;
  s.text = "if " + wrap(E, kPrecLambda + 1);
  s.body = body1;
  if (!body2.empty()) s.clauses.push_back({"else", body2});
  // assert
  if (s.clauses.empty() && s.body.size() == 1 && s.body[0].kind == Stmt::Kind::Raise && s.body[0].e1 &&
      s.body[0].e1->kind == ExKind::AssertError) {
    ExP msg = s.body[0].e1->a;
    out.push_back(line("assert " + wrap(negate(E), kPrecLambda + 1) + (msg ? ", " + wrap(msg, kPrecLambda + 1) : "")));
    return join;
  }
  out.push_back(s);
  if (r1 < 0 && (else_lo >= 0 ? r2 < 0 : false)) return -1;
  return join;
}

int Decompiler::handle_for(int i, int hi, const RegionCtx& ctx, Stack& st, std::vector<Stmt>& out) {
  if (!st.empty() && st.back()->kind == ExKind::Name && st.back()->text.size() && st.back()->text[0] == '.') {
    auto w = make_marker(ExKind::Iter);  // a comprehension's `.0` argument is already an iterator
    w->a = st.back();
    st.back() = w;
  }
  if (st.empty() || st.back()->kind != ExKind::Iter) fail("FOR_ITER without an iterator", i);
  ExP it = st.back();
  int exit = bc.at(i).target;
  int after = exit;
  if (minor >= 12) {
    if (std::strcmp(bc.at(exit).name, "END_FOR")) fail("FOR_ITER not ending at END_FOR", i);
    after = exit + 1;
  }
  LoopInfo L;
  L.continue_labels = {i};
  int X = loop_exit_label(i + 1, exit, after);
  L.break_label = X;
  RegionCtx bctx = ctx;
  bctx.follow = i;
  bctx.loop = &L;
  bctx.base = static_cast<int>(st.size());
  bctx.pure = false;
  bctx.stop_at_cond = false;
  Stack sb = st;
  auto sink = push_sink(sb);
  Stmt f;
  f.kind = Stmt::Kind::For;
  region(i + 1, exit, bctx, sb, f.body);
  if (!sink->filled) fail("for loop whose target is not stored", i);
  f.target = sink->targets[0];
  f.e1 = it->a;
  f.text = "for " + f.target + " in " + wrap(it->a, kPrecLambda + 1);
  st.pop_back();
  // 3.12 inlined comprehension: the loop appends to the list/set/dict just below its iterator
  const bool appends = !st.empty() && appends_to(f.body, st.back());
  if (appends) {
    st.back() = inline_comprehension(f, st.back(), i);
    if (!same_label(X, after)) fail("comprehension with a break", i);
    // (3.12, a comprehension that awaits: END_FOR jumps over the comprehension's cleanup handler,
    // which ends in RERAISE, to the code after it)
    if (after < bc.size() && !std::strcmp(bc.at(after).name, "JUMP_FORWARD") && bc.at(after).target > after &&
        bc.at(after).target <= hi && !std::strcmp(bc.at(bc.at(after).target - 1).name, "RERAISE"))
      return bc.at(after).target;
    return after;
  }
  const int next = loop_else(f, X, after, hi, ctx, st, i);
  out.push_back(f);
  return next;
}

int Decompiler::handle_while_true(int h, int hi, const RegionCtx& ctx, Stack& st, std::vector<Stmt>& out) {
  int L = -1;
  for (int j = h; j < hi; ++j)
    if (bc.at(j).target == h && has(bc.at(j).name, "BACKWARD")) L = j;
  LoopInfo info;
  info.continue_labels = {h};
  Stmt w;
  w.kind = Stmt::Kind::While;
  w.text = "while True";
  RegionCtx bctx = ctx;
  bctx.loop = &info;
  bctx.loop_start = h;
  bctx.base = static_cast<int>(st.size());
  Stack sb = st;
  if (is_uncond_jump(L)) {
    int X = loop_exit_label(h, L + 1, -1);
    info.break_label = X;
    bctx.follow = h;
    region(h, L, bctx, sb, w.body);
    out.push_back(w);
    if (X < 0) return -1;
    if (same_label(X, L + 1) && X <= hi) return X;
    if (X > hi && ctx.follow >= 0 && same_label(X, ctx.follow)) return hi;
    if (X == hi) return hi;
    fail("while loop whose exit is not right after it", L);
  }
  // 3.11: a conditional backward jump ends the body; falling out of it leaves the loop
  int X = loop_exit_label(h, L + 1, L + 1);
  if (!same_label(X, L + 1)) fail("while loop with two exits", L);
  info.break_label = L + 1;
  bctx.follow = -1;
  int r = region(h, L + 1, bctx, sb, w.body);
  if (r >= 0) {
    Stmt b = line("break");
    b.kind = Stmt::Kind::Break;
    w.body.push_back(b);
  }
  out.push_back(w);
  return L + 1;
}

}  // namespace kiln::decompiler
