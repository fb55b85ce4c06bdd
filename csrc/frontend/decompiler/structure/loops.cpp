// Loops: for loops (FOR_ITER ranges, comprehension loops over `.0`), `while True` loops (a
// backward jump to a header without a guard), async for (GET_ANEXT/SEND with the
// StopAsyncIteration handler) and loop else blocks (code between the natural exit and a break
// target past it). While loops with a guard are recognised by the condition walk (conditions.cpp).
#include <algorithm>
#include <cstring>

#include "frontend/decompiler/decompiler_state.h"

namespace kiln::decompiler {

namespace {

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

}  // namespace

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
