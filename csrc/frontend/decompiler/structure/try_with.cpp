// try/except/else/finally and with blocks, found from the exception table (3.11+: no SETUP_*
// instructions). A try body is the span of ranges whose handler starts with PUSH_EXC_INFO;
// except clauses are CHECK_EXC_MATCH tests in that handler; a handler that tests nothing and
// ends in RERAISE 0 is a finally block, whose copies on the normal exits of the body are
// skipped. A with block's handler starts with WITH_EXCEPT_START; its __exit__(None, None, None)
// calls disappear as values of the WithExit marker.
#include <cstring>

#include <algorithm>

#include "frontend/decompiler/decompiler_state.h"

namespace kiln::decompiler {

namespace {
bool is(const frontend::Instruction& in, const char* n) { return !std::strcmp(in.name, n); }
}  // namespace

int Decompiler::covering_handler(int index) const {
  if (index < 0 || index >= bc.size() || cover_[index] < 0) return -1;
  return bc.index_of_offset(exc[cover_[index]].target);
}

bool Decompiler::chain_contains(int index, int handler) const {
  int x = covering_handler(index);
  for (int steps = 0; x >= 0 && steps < 64; ++steps) {
    if (x == handler) return true;
    x = covering_handler(x);
  }
  return false;
}

int Decompiler::handler_depth(int handler) const {
  for (auto& e : exc)
    if (bc.index_of_offset(e.target) == handler) return e.depth;
  return -1;
}

int Decompiler::span_end(int handler, int from) const {
  int end = -1;
  // 3.12 places handlers after the code: a nested try's handler code (its finally block, its
  // cleanup) re-raises into this handler from there. Those ranges are not the body: the body's
  // ranges start before the first handler placed after the body's start.
  int body_start = -1, handlers_from = -1;
  for (auto& e : exc)
    if (bc.index_of_offset(e.target) == handler) {
      const int first = bc.index_of_offset(e.start);
      if (first >= 0 && (body_start < 0 || first < body_start)) body_start = first;
    }
  // (a try whose body begins with a nested try: 3.12 protects this handler's body only where the
  // nested try's handler is placed, after the code; the body starts where the try starts)
  if (from >= 0 && (body_start < 0 || from < body_start)) body_start = from;
  if (minor >= 12 && body_start >= 0)
    for (auto& e : exc) {
      const int t = bc.index_of_offset(e.target);
      if (t > body_start && (handlers_from < 0 || t < handlers_from)) handlers_from = t;
    }
  for (auto& e : exc) {
    // (3.12 puts an await's CLEANUP_THROW after the function's code, covered by the same handler)
    const int first = bc.index_of_offset(e.start);
    if (first >= 0 && first < bc.size() && is(bc.at(first), "CLEANUP_THROW")) continue;
    const int t = bc.index_of_offset(e.target);
    if (handlers_from >= 0) {
      // 3.12: the body is covered by this handler, or (before the handlers) by the handlers of tries
      // nested in it (a nested try may end the body); a nested handler's cleanup (COPY 3;
      // POP_EXCEPT; RERAISE 1), placed among the handlers, re-raises into this one but is no body
      const bool cleanup = first >= handlers_from && first + 2 < bc.size() && is(bc.at(first), "COPY") && bc.at(first).arg == 3 &&
                           is(bc.at(first + 1), "POP_EXCEPT") && is(bc.at(first + 2), "RERAISE") &&
                           bc.index_of_offset(e.end) <= first + 3;
      // (likewise the exit of a nested handler placed there: an except clause's or a with block's
      // handler from its POP_EXCEPT on, which jumps back to the code after its statement)
      const bool with_exit = first >= handlers_from && first < bc.size() && is(bc.at(first), "POP_EXCEPT");
      if ((t == handler && !cleanup && !with_exit) || (first < handlers_from && chain_contains(t, handler))) end = std::max(end, e.end);
      continue;
    }
    if (t == handler) end = std::max(end, e.end);
  }
  if (end < 0) return -1;
  int idx = bc.index_of_offset(end);
  return idx < 0 ? bc.size() : idx;
}

int Decompiler::handler_cleanup(int h) const {
  for (int q = h; q + 2 < bc.size(); ++q)
    if (is(bc.at(q), "COPY") && bc.at(q).arg == 3 && is(bc.at(q + 1), "POP_EXCEPT") && is(bc.at(q + 2), "RERAISE") &&
        bc.at(q + 2).arg == 1)
      return q;
  return -1;
}

int Decompiler::past_nested_handler(int k, int lo, int hi, int skipped) const {
  if (k >= bc.size() || !is(bc.at(k), "PUSH_EXC_INFO") || lo >= hi) return k;
  const int lo_off = bc.at(lo).offset, hi_off = hi < bc.size() ? bc.at(hi).offset : bc.at(bc.size() - 1).offset + 2;
  const int skipped_off = skipped >= 0 && skipped < k ? bc.at(skipped).offset : bc.at(k).offset;
  bool any = false, inner = true;
  for (auto& e : exc)
    if (bc.index_of_offset(e.target) == k)
      any = true, inner = inner && ((e.start >= lo_off && e.end <= hi_off) || (e.start >= skipped_off && e.end <= bc.at(k).offset));
  const int c = handler_cleanup(k);
  return any && inner && c >= 0 ? c + 3 : k;
}

std::vector<int> Decompiler::inner_handler_exits(int lo, int hi) const {
  std::vector<int> out;
  if (lo >= hi || hi > bc.size()) return out;
  const int lo_off = bc.at(lo).offset, hi_off = hi < bc.size() ? bc.at(hi).offset : bc.at(bc.size() - 1).offset + 2;
  std::vector<int> done;
  for (auto& e : exc) {
    const int h = bc.index_of_offset(e.target);
    // (an except or with handler; not an await's or yield from's CLEANUP_THROW)
    if (h < hi || h >= bc.size() || !is(bc.at(h), "PUSH_EXC_INFO") || std::find(done.begin(), done.end(), h) != done.end()) continue;
    done.push_back(h);
    bool inner = true;
    for (auto& f : exc)
      if (f.target == e.target) inner = inner && f.start >= lo_off && f.end <= hi_off;
    if (!inner) continue;
    const int end = handler_cleanup(h);  // the handler runs to its cleanup
    if (end < 0) continue;
    for (int q = h; q < end; ++q) {
      const int t = bc.at(q).target;
      if (t >= 0 && (t < h || t > end + 2)) out.push_back(t);
    }
  }
  return out;
}

int Decompiler::finally_copy_end(int lo, int hi, int pos, int* tail) const {
  // the same instructions as the handler's copy [lo, hi) (jump targets aside), except that where a
  // branch of the handler's copy re-raises (RERAISE 0) this copy returns None or jumps on
  // A try nested in the finally block has its handler inline in one copy and placed after the
  // other (3.12 puts the normal copy's past the code that follows it): a handler block, from its
  // PUSH_EXC_INFO to its cleanup's `COPY 3; POP_EXCEPT; RERAISE 1`, is skipped where it stands.
  auto past_handler = [&](int j) {
    if (j >= bc.size() || !is(bc.at(j), "PUSH_EXC_INFO")) return j;
    for (int q = j + 1; q + 2 < bc.size(); ++q)
      if (is(bc.at(q), "COPY") && bc.at(q).arg == 3 && is(bc.at(q + 1), "POP_EXCEPT") && is(bc.at(q + 2), "RERAISE") &&
          bc.at(q + 2).arg == 1)
        return q + 3;
    return j;
  };
  // 3.12 copies a short return block after the try (`return c.log`) into the normal copy's
  // branch ends: straight-line instructions ending in a return, each copy like the first
  auto return_block = [&](int j) {
    for (int q = j; q < bc.size() && q < j + 8; ++q) {
      if (bc.at(q).target >= 0 || is(bc.at(q), "RERAISE") || is(bc.at(q), "RAISE_VARARGS")) return 0;
      if (is(bc.at(q), "RETURN_VALUE") || is(bc.at(q), "RETURN_CONST")) return q + 1 - j;
    }
    return 0;
  };
  if (tail) *tail = -1;
  int a = lo, b = pos;
  while (a < hi) {
    if (a != lo) a = past_handler(a);
    if (b != pos) b = past_handler(b);
    // (a line's NOP, such as a nested `try:`'s, may stand in one copy and not in the other)
    while (a < hi && is(bc.at(a), "NOP")) ++a;
    while (b < bc.size() && is(bc.at(b), "NOP") && (a >= hi || !is(bc.at(a), "NOP"))) ++b;
    if (a >= hi) break;
    if (b >= bc.size() || (b != pos && b == lo - 1)) return -1;
    // (an await's CLEANUP_THROW stands inline in the handler's copy; 3.12 places the normal copy's
    // after the code)
    if (is(bc.at(a), "CLEANUP_THROW") && !is(bc.at(b), "CLEANUP_THROW")) {
      ++a;
      continue;
    }
    // a break out of a loop in the finally block: the handler's copy jumps over the inline handler
    // of a try ending the loop body and the loop's back edge; the normal copy, whose handler and
    // back edge 3.12 places after the code, falls through to the code after the loop
    if (is(bc.at(a), "JUMP_FORWARD") && !is_uncond_jump(b)) {
      const int t = bc.at(a).target;
      int q = a + 1;
      bool back_edge = false;
      for (int guard = 0; guard < 16 && q < t; ++guard) {
        const int p = past_handler(q);
        if (p != q) q = p;
        else if (is_uncond_jump(q) && has(bc.at(q).name, "BACKWARD") && bc.at(q).target >= lo && bc.at(q).target < q) ++q, back_edge = true;
        else break;
      }
      if (q == t && t <= hi && back_edge) {
        a = t;
        continue;
      }
    }
    const auto &x = bc.at(a), &y = bc.at(b);
    const bool reraise = is(x, "RERAISE") && x.arg == 0;
    // (3.12 reads a local in the handler's copy with LOAD_FAST_CHECK where it may be unbound, and
    // with LOAD_FAST in the normal exit's copy, where it is not)
    const bool same_op = x.opcode == y.opcode || (is(x, "LOAD_FAST_CHECK") && is(y, "LOAD_FAST"));
    // (a YIELD_VALUE's argument is the stack depth, deeper in the handler's copy by the exception)
    if (same_op && (x.target >= 0 || x.arg == y.arg || is(x, "YIELD_VALUE"))) ++a, ++b;
    else if (reraise && is_uncond_jump(b)) {
      // a branch of the finally block that ends the block (its RERAISE 0 just before the last
      // one): the normal copy's jump there is also the copy's exit to the code after the try
      if (a + 1 >= hi || past_handler(a + 1) >= hi) return b;
      ++a, ++b;
    }
    // a branch to the block's end (its RERAISE 0) that the normal copy inverts around its jump
    // out (3.12: `POP_JUMP_IF_TRUE over; JUMP_BACKWARD` where the finally block's if ends a loop body)
    else if (is_cond_jump(a) && is_cond_jump(b) && x.opcode != y.opcode && x.target >= 0 && x.target < bc.size() &&
             is(bc.at(x.target), "RERAISE") && bc.at(x.target).arg == 0 && y.target == b + 2 && is_uncond_jump(b + 1))
      ++a, b += 2;
    else if (reraise && is(y, "RETURN_CONST") && code.consts.at(y.arg).is_none) ++a, ++b;
    else if (reraise && is(y, "LOAD_CONST") && code.consts.at(y.arg).is_none && b + 1 < bc.size() &&
             is(bc.at(b + 1), "RETURN_VALUE"))
      ++a, b += 2;
    else if (reraise && tail && return_block(b) > 0 && (*tail < 0 || block_copy_length(b, *tail) == return_block(b))) {
      if (*tail < 0) *tail = b;
      ++a;
      b += return_block(b);
    } else return -1;
  }
  return b;
}

int Decompiler::skip_finally_copy(int i, const RegionCtx& ctx, bool* innermost) const {
  for (auto it = ctx.finallies.rbegin(); it != ctx.finallies.rend(); ++it) {
    if (innermost) *innermost = it == ctx.finallies.rbegin();
    int h = (*it)[0], lo = (*it)[1], hi = (*it)[2];
    if (hi <= lo || i == lo) continue;
    if (chain_contains(i, h)) continue;
    int e = finally_copy_end(lo, hi, i);
    if (e >= 0) return e;
  }
  return i;
}

int Decompiler::handle_try(int i, int hi, const RegionCtx& ctx, Stack& st, std::vector<Stmt>& out) {
  if (!ctx.finallies.empty()) {
    bool innermost = false;
    int j = skip_finally_copy(i, ctx, &innermost);
    // the normal exit's copy of the innermost finally block, at the try body's own level: the
    // body ends there (3.12 places the code after the try right after it)
    if (j != i && innermost && ctx.finally_stack == &st && static_cast<int>(st.size()) == ctx.base) {
      body_copy_at_ = i;
      return -3 - j;
    }
    if (j != i) return j;
  }
  const auto& cur = bc.at(i);
  if (is(cur, "POP_EXCEPT")) {
    if (st.empty() || st.back()->kind != ExKind::Dummy) fail("POP_EXCEPT without an exception state", i);
    st.pop_back();
    // `except E as e` ends with e = None; del e
    int j = i + 1;
    if (j + 2 < bc.size() && is(bc.at(j), "LOAD_CONST") && code.consts.at(bc.at(j).arg).is_none &&
        (is(bc.at(j + 1), "STORE_FAST") || is(bc.at(j + 1), "STORE_DEREF") || is(bc.at(j + 1), "STORE_NAME")) &&
        (is(bc.at(j + 2), "DELETE_FAST") || is(bc.at(j + 2), "DELETE_DEREF") || is(bc.at(j + 2), "DELETE_NAME")) &&
        bc.at(j + 1).arg == bc.at(j + 2).arg)
      j += 3;
    // 3.12 copies a small tail after the try (ending in return or raise) into the clause after its
    // POP_EXCEPT: the clause ends here, and that code runs after the try, no exception handled
    if (ctx.follow >= 0 && j < bc.size() && block_copy_length(j, resolve(ctx.follow)) > 0) return hi;
    return j;
  }
  // the outermost try handler around i that has not been structured yet
  int chosen = -1;
  for (int h = covering_handler(i), steps = 0; h >= 0 && steps < 64; h = covering_handler(h), ++steps) {
    if (h + 1 >= bc.size() || !is(bc.at(h), "PUSH_EXC_INFO") || is(bc.at(h + 1), "WITH_EXCEPT_START")) continue;
    if (handled_try_.count(h)) continue;
    if (handler_depth(h) != static_cast<int>(st.size())) continue;
    chosen = h;
  }
  if (chosen < 0) return -2;
  const int h = chosen;
  // active while this try is structured (its body's instructions are covered by h); a later walk
  // of the same code (a copy the compiler placed where a break or return goes) structures it anew
  struct Active {
    std::set<int>& set;
    int h;
    ~Active() { set.erase(h); }
  } active{handled_try_, h};
  handled_try_.insert(h);
  int E = span_end(h, i);
  const int C = covering_handler(h);
  if (E < 0 || C < 0 || E > h) fail("try block with an unexpected exception table", i);
  bool is_except = is(bc.at(h + 1), "POP_TOP");
  int reraise0 = -1;
  for (int j = h + 1; j < C; ++j) {
    if (covering_handler(j) != C) continue;
    if (is(bc.at(j), "CHECK_EXC_MATCH")) is_except = true;
    if (is(bc.at(j), "RERAISE") && bc.at(j).arg == 0) reraise0 = j;
  }
  Stmt t;
  t.kind = Stmt::Kind::Try;
  t.text = "try";
  if (!is_except) {
    // ---- try/finally ----
    if (reraise0 < 0) fail("finally block without RERAISE", h);
    Stack sf = st;
    sf.push_back(make_marker(ExKind::Dummy));
    sf.push_back(make_marker(ExKind::Dummy));
    RegionCtx fctx = ctx;
    fctx.follow = reraise0;
    fctx.finally_end = reraise0;
    fctx.base = static_cast<int>(st.size()) + 2;
    std::vector<Stmt> fbody;
    int r = region(h + 1, reraise0, fctx, sf, fbody);
    if (r != reraise0) fail("finally block that does not reach its end", h);
    RegionCtx bctx = ctx;
    bctx.finallies.push_back({h, h + 1, reraise0});
    bctx.finally_end = -1;
    bctx.follow = E;
    Stack sb = st;
    bctx.finally_stack = &sb;
    bctx.base = static_cast<int>(st.size());
    body_end_ = body_copy_at_ = -1;
    int rb = region(i, E, bctx, sb, t.body);
    int k = E, tail = -1;
    std::array<int, 2> copies{-1, -1};  // enclosing finally blocks' copies skipped before a return
    // `return <constant>` ending the body: the compiler marks its line with a NOP (at `lo`), runs
    // the finally copy (ending at k), then returns the constant (nothing else reaches that return);
    // inside enclosing try/finally bodies the copies of their finally blocks run first (asyncio
    // Condition.wait's `return True` in a try nested in one). Sets k past the return.
    auto const_return = [&](int lo, bool nested_only) {
      int r = k;
      for (int guard = 0; guard < 8 && r < h && !ctx.finallies.empty() && !is(bc.at(r), "NOP"); ++guard) {
        const int past = skip_finally_copy(r, ctx);
        if (past == r) break;
        r = past;
      }
      if (nested_only && r == k) return;
      const bool ret_const = r < h && (is(bc.at(r), "RETURN_CONST") ||
                                       (r + 1 < h && is(bc.at(r), "LOAD_CONST") && is(bc.at(r + 1), "RETURN_VALUE")));
      // (jumps inside the copies are their own; with enclosing copies, so are the blocks 3.12 places
      // after the return for them, CLEANUP_THROW, handlers and back edges jumping into them)
      bool reached = false;
      for (int j = 0; j < bc.size() && ret_const; ++j) {
        const int t = bc.at(j).target;
        reached = reached || ((j < lo || j > r) && t > (r == k ? lo : r - 1) && t <= r + 1);
      }
      if (!ret_const || reached) return;
      Stmt s;
      s.kind = Stmt::Kind::Return;
      s.e1 = const_ex(code.consts.at(bc.at(r).arg));
      s.text = s.e1->kind == ExKind::Const && s.e1->cst && s.e1->cst->is_none ? "return None" : "return " + wrap(s.e1, kPrecTuple);
      t.body.push_back(s);
      if (r != k) copies = {lo, r};
      k = r + (is(bc.at(r), "RETURN_CONST") ? 1 : 2);  // what follows that return (if anything) comes after the try
      // (3.12: an await's CLEANUP_THROW blocks placed there are exception paths, not code after the try)
      while (k < h && is(bc.at(k), "CLEANUP_THROW")) k += k + 1 < h && is_uncond_jump(k + 1) ? 2 : 1;
    };
    if (body_end_ >= 0) {
      k = body_end_;  // the body fell into its finally copy
      body_end_ = -1;
      // (3.12: the return's NOP and the copy lie inside the body's range)
      if (body_copy_at_ >= 0 && is(bc.at(body_copy_at_), "NOP") && !is(bc.at(h + 1), "NOP")) const_return(body_copy_at_, true);
    } else if (rb == E && sb.size() != st.size() && E < h) {
      // `return value` at the end of the body: the finally copy and the return follow the range
      RegionCtx rctx = bctx;
      int r = region(E, h, rctx, sb, t.body);
      if (r >= 0) fail("try body leaving a value on the stack", E);
      k = h;
    } else if (rb < 0) {
      // the body never completes normally (it ends in raise, or every path returns through the
      // copies handled above): there is no normal-exit copy, and nothing after the try is reached
      // from it (3.12 places unrelated code at E)
      k = h;
    } else if (E < h) {
      int e = E;  // (the body's last line's NOP: 3.11 keeps one where the body ends in `return const`)
      while (e < h && is(bc.at(e), "NOP")) ++e;
      k = finally_copy_end(h + 1, reraise0, e, &tail);
      if (k < 0 || k > h) fail("finally block without its normal-exit copy", E);
      if (e > E) const_return(E, false);
    }
    if (t.body.size() == 1 && t.body[0].kind == Stmt::Kind::Try && !t.body[0].clauses.empty() &&
        t.body[0].clauses.back().header != "finally") {
      Stmt inner = t.body[0];
      t.body = inner.body;
      t.clauses = inner.clauses;
    }
    t.clauses.push_back({"finally", fbody});
    out.push_back(t);
    if (tail >= 0) {  // what follows the try: the return block copied into the copy's branch ends
      int end = tail;
      while (!is(bc.at(end), "RETURN_VALUE") && !is(bc.at(end), "RETURN_CONST")) ++end;
      Stack s2 = st;
      if (region(tail, end + 1, ctx, s2, out) >= 0) fail("return block after a try/finally that does not return", tail);
      return -1;
    }
    // 3.12 places the handlers of the trys and with blocks nested in the body or in the finally
    // copy after that copy (which then ends in a return): they are no code after the try
    for (int guard = 0, first = k; guard < 16 && k < h; ++guard) {
      const int past = past_nested_handler(k, i, first, first);
      // (and the back edge of a loop in an enclosing finally block's copy skipped above, which
      // 3.12 places after the loop's handler)
      if (past == k && copies[1] >= 0 && is_uncond_jump(k) && has(bc.at(k).name, "BACKWARD") && bc.at(k).target > copies[0] &&
          bc.at(k).target < copies[1]) {
        ++k;
        continue;
      }
      if (past == k) break;
      k = past;
    }
    if (k >= h) return -1;
    if (is_uncond_jump(k)) {
      int J = bc.at(k).target;
      if (J <= hi && J > k) return J;
      std::vector<Stmt> tmp;
      int r2 = handle_jump(k, J, hi, ctx, tmp);
      for (auto& s : tmp) out.push_back(s);
      return r2;
    }
    RegionCtx cctx = ctx;
    const int saved_end = body_end_;
    body_end_ = -1;
    // (up to the handler, or the end of the enclosing region: 3.12 places the code after an
    // enclosing try, outside its body, before this try's handler)
    const int stop = std::min(h, hi);
    const int rk = k >= stop ? stop : region(k, stop, cctx, st, out);
    // what follows this try reached an enclosing try/finally body's normal-exit finally copy: the
    // enclosing body ends there too (3.12 puts the code after both tries before their handlers)
    if (rk >= 0 && body_end_ >= 0 && rk == body_end_) return -3 - rk;
    body_end_ = saved_end;
    return rk < 0 ? -1 : stop;
  }
  // ---- try/except/else ----
  // A `continue` or `break` ending a branch of the body unwinds the try first, so its jump (and a
  // break's pop of the for iterator) lies just past the protected range, before the body's normal
  // exit; the branch's conditional jump goes past it to that exit. The body runs to there.
  for (int j = i; j < E; ++j) {
    const int t = bc.at(j).target;
    if (!(is_cond_jump(j) || is_uncond_jump(j)) || t <= E || t >= h) continue;
    bool exits = true;
    for (int k = E; k < t && exits; ++k)
      exits = (is_uncond_jump(k) && bc.at(k).target != t) || is(bc.at(k), "POP_TOP") || is(bc.at(k), "NOP");
    if (exits && is_uncond_jump(t - 1)) E = t;
  }
  int join = -1;
  auto note_join = [&](int J, int at) {
    if (join < 0) join = J;
    else if (!same_label(join, J)) fail("except clauses that continue at different places", at);
  };
  auto loop_label = [&](int t) {
    if (!ctx.loop) return false;
    for (int c : ctx.loop->continue_labels)
      if (same_label(t, c)) return true;
    return ctx.loop->break_label >= 0 && same_label(t, ctx.loop->break_label);
  };
  // the body's normal exit jumps over the handlers; to a loop label that is not where the
  // enclosing region ends, it may be a break (or continue) ending the body instead (below)
  int body_exit = -1;
  if (E < h && is_uncond_jump(h - 1) && bc.at(h - 1).target > h) {
    const int t = bc.at(h - 1).target;
    if (E == h - 1 && loop_label(t) && !is_follow(ctx, t)) body_exit = t;
    else note_join(t, h - 1);
  }
  int to_follow = -1;  // a clause's jump to the loop label where the enclosing region ends
  for (int j = h; j < C; ++j) {
    if (!is_uncond_jump(j) || covering_handler(j) == C) continue;
    int t = bc.at(j).target;
    // 3.12 places handlers after the code that follows the try: their ends jump back to it
    // (a jump to an enclosing loop's exit or header is a break or continue, not where the try ends:
    // a break out of a for loop pops its iterator first, which the try's end never does)
    // (but a jump forward past the handlers to where the enclosing region ends is where the try
    // ends: the final test of a while loop whose body is this try, which 3.12 placed after them)
    if ((t >= C + 3 || (t >= E && t < h)) && (!loop_label(t) || (minor >= 12 && resolve(t) > C && is_follow(ctx, t)))) note_join(t, j);
    else if (loop_label(t) && is_follow(ctx, t)) to_follow = t;
  }
  // `try: ...; break` / `except E: <falls through>` as a loop body's last statement: the clauses go
  // on where the region ends, and the jump is the body's break, not where the try goes on
  // (`except E: ...; continue` and a `break` after the try: a structural difference)
  if (body_exit >= 0) {
    if (join < 0 && to_follow >= 0) join = to_follow, E = h;
    else note_join(body_exit, h - 1);
  }
  // every clause raises or returns: where the body's normal exit jumps (right after the body, or
  // after an else block that ends before the handlers) is where the try statement continues
  if (join < 0 && E < h && is_uncond_jump(E) && bc.at(E).target > E) join = bc.at(E).target;
  // (a try inside a finally block's exceptional copy: its body's normal exit re-raises, the end)
  if (join < 0 && E < h && ctx.finally_end >= 0 && is(bc.at(E), "RERAISE") && bc.at(E).arg == 0) join = ctx.finally_end;
  if (join < 0 && E < h && is_uncond_jump(h - 1) && bc.at(h - 1).target > h) join = bc.at(h - 1).target;
  // or (3.12, which places the code after the try there) the code right after the body (an else
  // block there runs exactly when it would after the try)
  if (join < 0 && minor >= 12 && E < h && !(is_uncond_jump(E) || !std::strcmp(bc.at(E).name, "RETURN_VALUE"))) join = E;
  // or, with nothing else to go on, where a clause jumps back to the loop label the enclosing region
  // ends at: the try is the loop body's last statement, a clause that falls through goes on there
  // (`except E: pass` at the end of a while True body, not `except E: continue` and `else: continue`)
  if (join < 0 && to_follow >= 0) join = to_follow;
  RegionCtx bctx = ctx;
  bctx.follow = E;
  Stack sb = st;
  int rb = region(i, E, bctx, sb, t.body);
  std::vector<Stmt> else_body;
  if (rb == E && sb.size() != st.size() && E < h) {
    // the body's last value is used (returned) just after the protected range: part of the body
    RegionCtx ectx = ctx;
    ectx.follow = join;
    int end = is_uncond_jump(h - 1) && bc.at(h - 1).target == join ? h - 1 : h;
    if (join > E && join < end) end = join;
    int r = region(E, end, ectx, sb, t.body);
    if (r >= 0 && sb.size() != st.size()) fail("try body leaving a value on the stack", E);
    // (3.12: that code returned, so it is not where the try goes on, as guessed above)
    if (r < 0 && join == E) join = -1;
  } else if (E < h && rb >= 0) {  // (a body that never falls through has no else block)
    RegionCtx ectx = ctx;
    ectx.follow = join;
    Stack se = st;
    int end = is_uncond_jump(h - 1) && bc.at(h - 1).target == join ? h - 1 : h;
    if (join > E && join < end) end = join;
    if (join != E) region(E, end, ectx, se, else_body);
  }
  int p = h + 1;
  while (p < C) {
    if (is(bc.at(p), "RERAISE")) break;
    Stack s = st;
    s.push_back(make_marker(ExKind::Dummy));
    auto sink = push_sink(s, "<exc>");
    RegionCtx c2 = ctx;
    c2.pure = true;
    c2.stop_at_cond = true;
    c2.base = static_cast<int>(st.size()) + 2;
    c2.follow = -1;
    Stack s2 = s;
    std::vector<Stmt> tmp;
    int r = -1;
    try {
      r = region(p, C, c2, s2, tmp);
    } catch (const NotPure&) {
      r = -1;
    } catch (const DecompileError&) {
      r = -1;
    }
    std::string header = "except";
    int body_start = p, next = C;
    if (r >= 0 && r < C && is_cond_jump(r) && !s2.empty() && s2.back()->text == "<excmatch>") {
      header += " " + wrap(s2.back()->a, kPrecLambda + 1);
      body_start = r + 1;
      next = bc.at(r).target;
      if (next <= r || next > C) fail("except clause whose test jumps backwards", r);
    }
    RegionCtx cctx = ctx;
    cctx.follow = join;
    cctx.base = static_cast<int>(st.size()) + 1;
    std::vector<Stmt> cbody;
    const int rc = region(body_start, next, cctx, s, cbody);
    // a clause that goes on after the try leaves the stack as the try found it (one that popped
    // more, a loop's iterator, was a break: printing it as falling through would be wrong source)
    if (rc >= 0 && s.size() < st.size()) fail("except clause that leaves the stack below the try's", body_start);
    if (sink->filled) header += " as " + sink->targets[0];
    t.clauses.push_back({header, cbody});
    if (next == C) break;
    p = next;
  }
  if (!else_body.empty()) t.clauses.push_back({"else", else_body});
  out.push_back(t);
  if (join < 0) return -1;
  if (join <= hi && join > i) return join;
  if (ctx.follow >= 0 && same_label(join, ctx.follow)) return hi;
  std::vector<Stmt> tmp;
  int r = handle_jump(h, join, hi, ctx, tmp);
  for (auto& s : tmp) out.push_back(s);
  return r;
}

int Decompiler::handle_with(int i, int hi, const RegionCtx& ctx, Stack& st, std::vector<Stmt>& out) {
  if (st.empty()) fail("with block with an empty stack", i);
  const bool async = is(bc.at(i), "BEFORE_ASYNC_WITH");
  ExP mgr = st.back();
  st.pop_back();
  // async with: BEFORE_ASYNC_WITH; GET_AWAITABLE 1; LOAD_CONST None; SEND ... (awaiting __aenter__)
  int body = i + 1;
  if (async) {
    if (body + 2 >= bc.size() || !is(bc.at(body), "GET_AWAITABLE") || bc.at(body).arg != 1) fail("async with without its await", i);
    body = send_end(body + 2);
  }
  int H = covering_handler(body);
  if (H < 0 || H + 1 >= bc.size() || !is(bc.at(H + 1), "WITH_EXCEPT_START")) fail("with block without its handler", i);
  handled_try_.insert(H);
  int after = -1;
  for (int j = H + 2; j + 3 < bc.size(); ++j)
    if (is(bc.at(j), "POP_TOP") && is(bc.at(j + 1), "POP_EXCEPT") && is(bc.at(j + 2), "POP_TOP") && is(bc.at(j + 3), "POP_TOP")) {
      after = j + 4;
      break;
    }
  if (after < 0) fail("with block whose handler has an unexpected shape", H);
  Stack sb = st;
  sb.push_back(make_marker(ExKind::WithExit));
  auto sink = push_sink(sb, "<with>");
  RegionCtx bctx = ctx;
  bctx.follow = after;
  // A with block that ends the function: 3.12 copies the return into the handler's continuation,
  // so nothing jumps to `after`; a break or return leaving the body (a loop's exit) jumps to the
  // normal exit's __exit__(None, None, None) call instead, the one outside the handler's ranges
  if (after < bc.size() && (is(bc.at(after), "RETURN_CONST") || is(bc.at(after), "RETURN_VALUE")))
    for (int j = body; j + 3 < H; ++j)
      if (covering_handler(j) != H && is(bc.at(j), "LOAD_CONST") && code.consts.at(bc.at(j).arg).is_none &&
          is(bc.at(j + 1), "LOAD_CONST") && is(bc.at(j + 2), "LOAD_CONST") &&
          (is(bc.at(j + 3), "CALL") || is(bc.at(j + 3), "PRECALL")) && bc.at(j + 3).arg == 2) {
        bool jumped = false;
        for (int q = body; q < H && !jumped; ++q) jumped = bc.at(q).target == j;
        if (jumped) bctx.follow = j;
        break;
      }
  bctx.base = static_cast<int>(sb.size()) - 1;
  bctx.with_stack = &sb;
  bctx.with_depth = static_cast<int>(st.size());
  Stmt w;
  w.kind = Stmt::Kind::With;
  const std::string kw = async ? "async with " : "with ";
  int r = region(body, H, bctx, sb, w.body);
  std::string item = wrap(mgr, kPrecLambda + 1) + (sink->filled ? " as " + sink->targets[0] : "");
  if (w.body.size() == 1 && w.body[0].kind == Stmt::Kind::With && w.body[0].text.compare(0, kw.size(), kw) == 0) {
    Stmt inner = w.body[0];
    w.text = kw + item + ", " + inner.text.substr(kw.size());
    w.body = inner.body;
  } else {
    w.text = kw + item;
  }
  out.push_back(w);
  // the body fell through its normal exit (__exit__(None, None, None) called and its result
  // popped): the code after the block goes on from there
  if (r >= 0 && r < H && static_cast<int>(sb.size()) == bctx.with_depth && !(is_uncond_jump(r) && same_label(bc.at(r).target, after))) {
    if (r <= hi) return r;
    fail("with block continuing outside its enclosing block", i);
  }
  if (after <= hi) return after;
  if (ctx.follow >= 0 && same_label(after, ctx.follow)) return hi;
  // (3.12: the handler's continuation jumps back to the jump that ends the body's normal exit, a
  // break or continue of the enclosing loop: the enclosing region goes on at that jump)
  if (r >= 0 && r <= hi && r < H && static_cast<int>(sb.size()) == bctx.with_depth && is_uncond_jump(r)) return r;
  fail("with block continuing outside its enclosing block", i);
}

}  // namespace kiln::decompiler
