// Conditions: and/or conditions made of several conditional jumps, combined by their targets
// (Atom per jump); if/elif/else statements; conditional expressions (branches that leave one more
// value on the stack, including 3.12's copied tails); value and/or (3.11's JUMP_IF_X_OR_POP and
// 3.12's COPY; POP_JUMP forms); a guard repeated at the end of its body (while loops).
#include <algorithm>
#include <cstring>

#include "frontend/decompiler/decompiler_state.h"

namespace kiln::decompiler {

namespace {

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
  bool always = false;  // a JUMP_FORWARD inside the condition: a conditional expression's branch end
  int next = -1;        // where the code after the atom starts
};

}  // namespace

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
    a.next = j + 1;
    // 3.12 has no backward conditional jump: a test whose failure continues the loop jumps over a
    // JUMP_BACKWARD to the loop's header; read as the one jump to that header, as 3.11 compiles it
    // (and a test that jumps to such a JUMP_BACKWARD jumps to the header)
    auto continues = [&](int x) {
      if (minor < 12 || !ctx.loop || x < 0 || x >= bc.size() || std::strcmp(bc.at(x).name, "JUMP_BACKWARD")) return false;
      for (int c : ctx.loop->continue_labels)
        if (c == bc.at(x).target) return true;
      return false;
    };
    if (j + 2 < hi && a.target == j + 2 && continues(j + 1)) {
      a.target = bc.at(j + 1).target;
      a.jump_if_true = !a.jump_if_true;
      a.next = j + 2;
    } else if (continues(a.target)) {
      a.target = bc.at(a.target).target;
    }
  };
  std::vector<Atom> atoms;
  Atom first;
  first.start = stmt_start;
  sense(i, st.back(), first);
  st.pop_back();
  atoms.push_back(first);
  const int base = static_cast<int>(st.size());
  for (int p = first.next; p < hi;) {
    // `if (x if c else y):` jumps from the end of x's tests over y's (to the body): an atom that
    // always jumps, right before the code that c's false exit reaches
    // (not a comparison chain's jump over its cleanup, which the chain walks over)
    if (!std::strcmp(bc.at(p).name, "JUMP_FORWARD") && bc.at(p).target > p + 1 && !skip_[p + 1]) {
      bool else_start = false;
      for (const Atom& a : atoms) else_start |= a.target == p + 1;
      if (!else_start) break;
      Atom a;
      a.start = a.jump = p;
      a.next = p + 1;
      a.target = bc.at(p).target;
      a.jump_if_true = true;
      a.always = true;
      atoms.push_back(a);
      ++p;
      continue;
    }
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
    // (by handler: 3.12 splits a range around a JUMP_BACKWARD it leaves out)
    for (int j = p; j <= r && same_try; ++j)
      same_try = cover_[j] == cover_[i] || covering_handler(j) == covering_handler(i) || !std::strcmp(bc.at(j).name, "NOP");
    if (!same_try) break;
    bool same_below = true;
    for (int k = 0; k < base; ++k) same_below &= s2[k] == st[k];
    if (!same_below) break;
    Atom a;
    a.start = p;
    sense(r, s2.back(), a);
    atoms.push_back(a);
    p = a.next;
  }
  while (atoms.back().always) atoms.pop_back();
  int k = -1, B = -1, F = -1;
  auto is_start = [&](int t) {
    for (auto& a : atoms) if (a.start == t) return true;
    return false;
  };
  // (the start of an atom that always jumps is its target: 3.12 threads the true exits of a
  // conditional expression's first branch straight to the body, 3.11 to that jump)
  auto canon = [&](int t) {
    for (size_t n = 0; n < atoms.size(); ++n)
      if (atoms[n].always && atoms[n].start == t) t = atoms[n].target;
    return t;
  };
  auto lab_eq = [&](int a, int b) {
    a = canon(a), b = canon(b);
    return a == b || (!is_start(a) && !is_start(b) && same_label(a, b));
  };
  std::function<ExP(int, int, int, int)> build = [&](int l, int r, int S, int Fl) -> ExP {
    if (l == r) {
      const Atom& a = atoms[l];
      if (a.always) return nullptr;
      int ft = l == k ? B : atoms[l + 1].start;
      if (lab_eq(a.target, Fl) && lab_eq(ft, S)) return a.jump_if_true ? negate(a.cond) : a.cond;
      if (lab_eq(a.target, S) && lab_eq(ft, Fl)) return a.jump_if_true ? a.cond : negate(a.cond);
      return nullptr;
    }
    // `x if c else y`: c's atoms [l, m] fall into x's [m + 1, j - 1] and go to y's [j + 1, r] when
    // false; x's true exit is the atom j, which always jumps to S
    for (int j = l + 2; j < r; ++j) {
      if (!atoms[j].always || !lab_eq(atoms[j].target, S)) continue;
      for (int m = l; m + 1 < j; ++m) {
        ExP C = build(l, m, atoms[m + 1].start, atoms[j + 1].start);
        ExP X = C ? build(m + 1, j - 1, S, Fl) : nullptr;
        ExP Y = X ? build(j + 1, r, S, Fl) : nullptr;
        if (Y)
          return make_ex(wrap(X, kPrecTernary + 1) + " if " + wrap(C, kPrecTernary + 1) + " else " + wrap(Y, kPrecTernary),
                         kPrecTernary);
      }
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
  ExP E;
  for (;;) {
    // the longest prefix whose jumps go to later atoms, its end, or one outside label
    k = static_cast<int>(atoms.size()) - 1;
    for (; k >= 0; --k) {
      if (atoms[k].always) continue;
      B = atoms[k].next;
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
    E = build(0, k, B, F);
    if (E) break;
    // a JUMP_FORWARD taken for the end of a conditional expression's branch that is not one: the
    // condition ends before it
    auto al = std::find_if(atoms.begin(), atoms.end(), [](const Atom& x) { return x.always; });
    if (al == atoms.end()) fail("condition whose jumps cannot be combined", i);
    atoms.erase(al, atoms.end());
  }
  const int first_jump = i;

  // a guard repeated at the end of the body: a while loop
  if (!ctx.pure && base == ctx.base && F > B && F <= hi && stmt_start < B) {
    int glen = B - stmt_start, last = F - 1, tail = -1;
    if (minor == 11 && is_cond_jump(last) && bc.at(last).target == B) tail = F - glen;
    if (minor >= 12 && is_uncond_jump(last) && bc.at(last).target == B) tail = F - 1 - glen;
    // the final test leaves the loop into a copy of the exit block F holds (`return None`): 3.11
    // falls out of its backward jump into it, 3.12 jumps over its JUMP_BACKWARD to it
    for (int L = F - 2; tail < 0 && L > B; --L)
      if ((minor == 11 ? is_cond_jump(L) : is_uncond_jump(L)) && bc.at(L).target == B) {
        if (block_copy_length(L + 1, F) == F - L - 1) tail = (minor == 11 ? L + 1 : L) - glen;
        break;
      }
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
    auto copies_guard = [&](int t) {
      bool ok = t >= B && t + glen <= bc.size();
      for (int q = 0; ok && q < glen; ++q) {
        const auto &x = bc.at(stmt_start + q), &y = bc.at(t + q);
        bool jx = is_cond_jump(stmt_start + q), jy = is_cond_jump(t + q);
        if (jx != jy) ok = false;
        else if (!jx && (x.opcode != y.opcode || x.arg != y.arg)) ok = false;
      }
      return ok;
    };
    // 3.12, a body whose end nothing falls into (a try around an endless loop, left only through
    // its except block): the final test stands after the handlers, reached only from there, as
    // `<guard copy>; POP_JUMP_IF_x X; JUMP_BACKWARD B; X: JUMP_BACKWARD F` (heapq.merge)
    int body_end = tail, tail_end = F;
    if (minor >= 12 && !(tail >= B && copies_guard(tail))) {
      int found = -1;
      for (int T = F + 1; T + glen + 1 < bc.size() && found != -2; ++T) {
        const int c = T + glen - 1, X = T + glen + 1;
        if (is_cond_jump(c) && bc.at(c).target == X && is_uncond_jump(X - 1) && bc.at(X - 1).target == B &&
            is_uncond_jump(X) && bc.at(X).target == F && copies_guard(T))
          found = found == -1 ? T : -2;  // (two candidates: none)
      }
      if (found >= 0) tail = found, body_end = F, tail_end = found + glen + 2;
    }
    bool match = tail >= B && copies_guard(tail);
    if (match) {
      LoopInfo L;
      L.continue_labels = {stmt_start, tail};
      int X = loop_exit_label(B, body_end, F, {stmt_start, tail});
      for (int j = tail; j < tail_end; ++j) {  // the tail's own exits
        int t = bc.at(j).target;
        if (t >= 0 && t != B && resolve(t) != resolve(B) && (t < tail || t >= tail_end) && !same_label(t, F) && !same_label(t, X))
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
      region(B, body_end, bctx, sb, w.body);
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
    if (is_follow(ctx, F)) {
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
  // A jump inside the branch to F: F is reached from the branch too, so it is where the if ends and
  // the branch's final jump is a break (or continue) of its own, not a jump over an else block.
  bool branch_reaches_f = false;
  for (int j = B; j < last && !branch_reaches_f; ++j)
    branch_reaches_f = !skip_[j] && (is_cond_jump(j) || is_uncond_jump(j)) && bc.at(j).target == F;
  if (last >= B && (is_uncond_jump(last) || to_finally_end) && !branch_reaches_f) {
    int J = to_finally_end ? ctx.finally_end : bc.at(last).target;
    if (J > F && (J < hi || (J == hi && ctx.follow >= 0 && same_label(J, ctx.follow)))) { then_end = last; else_lo = F; else_end = J; join = J; }
    else if (J > hi && ctx.follow >= 0 && same_label(J, ctx.follow)) { then_end = last; else_lo = F; else_end = hi; join = hi; }
  }
  if (else_lo < 0 && last >= B && ends_flow(last)) {
    // A then-branch that never falls through (it ends in raise, return or a loop's back edge) has
    // no jump over an else block: CPython drops the unreachable one. An else is still there when
    // jumps inside the branch go past F to one label J (an inner if's end, threaded through the
    // dropped jump): [F, J) is then reached only from the condition, the else block.
    // (the handlers of a try ending the branch, placed after its end, count: an except block that
    // falls through jumps to J too)
    int J = -1;
    bool ok = true;
    for (int j = B; j < F && ok; ++j) {
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
    // 3.12 places the handlers of a try inside the branch after all the code: an except block
    // that falls through jumps from there to J
    for (int t : inner_handler_exits(B, F))
      if (t == F) ok = false;
      else if (t > F) {
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
  // a join at the end of the enclosing region: the branches may also jump straight to where that
  // region goes on (its follow), threaded past it (fractions.Fraction.__new__, 3.12)
  if (join == hi && ctx.follow >= 0 && !same_label(hi, ctx.follow)) sub.follow_alt = ctx.follow, sub.follow_alt_for = join;
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
  // 3.12 `return x if c else <constant>`: the else branch is `LOAD_CONST; RETURN_VALUE`, which a
  // return statement never compiles to (it is RETURN_CONST), after a then branch returning a value
  if (minor >= 12 && static_cast<int>(n0) == ctx.base && else_lo < 0 && r1 < 0 && F + 1 < hi && F - 1 > B &&
      !std::strcmp(bc.at(F).name, "LOAD_CONST") && !std::strcmp(bc.at(F + 1).name, "RETURN_VALUE") &&
      !std::strcmp(bc.at(F - 1).name, "RETURN_VALUE")) {
    int r = copied_tail_ternary(B, F, hi, ctx, st, E);
    if (r >= 0) return r;
  }
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

}  // namespace kiln::decompiler
