// `match` statements (3.11/3.12). The subject stays on the stack while the cases are tried: each
// case but an unguarded last one copies it (COPY 1), runs its pattern on the copy, jumping on
// failure to a cleanup that pops what the pattern left and falls into the next case; on success
// the captures are stored, the guard tested, the subject popped, and the body runs. The patterns
// rebuilt: values (`case 0`, `case Color.RED`), None/True/False, captures and `_`, class patterns
// (`case P(a, x=b)`) and fixed-length sequences (`case [a, _]`) whose parts are captures or `_`.
// Or-patterns of value patterns (`case 1 | 2`), mapping patterns with constant keys whose values
// are captures, `_`, constants or None (`case {"k": x, "n": 1}`), and a wildcard after a case that
// consumed the subject. Anything else (`**rest`, stars, nested patterns, `as`) raises DecompileError.
#include <cstring>

#include "frontend/decompiler/decompiler_state.h"

namespace kiln::decompiler {

namespace {

bool is(const frontend::Instruction& in, const char* n) { return !std::strcmp(in.name, n); }
bool is_store(const frontend::Instruction& in) {
  return is(in, "STORE_FAST") || is(in, "STORE_NAME") || is(in, "STORE_DEREF") || is(in, "STORE_GLOBAL");
}

}  // namespace

struct MatchCase {
  std::string pattern, guard;
  int body = -1;                                // first instruction of the body
  std::vector<std::pair<int, int>> fails;       // (jump index, values the pattern left above the base)
  int next = -1;                                // where the next case starts (after the cleanup)
  int cleanup = -1;                             // first instruction of the failure cleanup
  bool copied = false;                          // the case ran on a copy of the subject
};

// A capture or `_` consuming the value on top (class and sequence pattern parts).
static bool part(const Decompiler& d, int& p, std::string& text) {
  const auto& in = d.bc.at(p);
  if (is(in, "POP_TOP")) {
    text = "_";
  } else if (is_store(in)) {
    text = is(in, "STORE_FAST") || is(in, "STORE_DEREF") ? d.local(in.arg) : d.name(in.arg);
    if (!is_identifier(text) || text == "_") return false;
  } else {
    return false;
  }
  ++p;
  return true;
}

bool Decompiler::match_pattern(int& p, bool copied, MatchCase& mc) {
  // (fail depths: the values above the stack the case started with, less the copy or subject the
  // pattern consumed: a sequence pattern's copy and a class pattern's result stay on failure)
  auto cond_false = [&](int j) { return is_cond_jump(j) && has_name(j, "FALSE") && !has_name(j, "NONE"); };
  const auto& in = bc.at(p);
  // None: POP_JUMP_IF_NOT_NONE fail
  if (is_cond_jump(p) && has_name(p, "NOT_NONE")) {
    mc.pattern = "None";
    mc.fails.push_back({p, 0});
    ++p;
    return true;
  }
  if (is(in, "MATCH_SEQUENCE")) {
    // MATCH_SEQUENCE; POP_JUMP_IF_FALSE f; GET_LEN; LOAD_CONST n; COMPARE_OP ==; POP_JUMP_IF_FALSE f; UNPACK_SEQUENCE n
    if (p + 6 >= bc.size() || !cond_false(p + 1) || !is(bc.at(p + 2), "GET_LEN") || !is(bc.at(p + 3), "LOAD_CONST") ||
        !is(bc.at(p + 4), "COMPARE_OP") || !cond_false(p + 5) || !is(bc.at(p + 6), "UNPACK_SEQUENCE"))
      return false;
    const int n = bc.at(p + 6).arg;
    if (code.consts.at(bc.at(p + 3).arg).source != std::to_string(n) || (minor >= 12 ? bc.at(p + 4).arg >> 4 : bc.at(p + 4).arg) != 2)
      return false;
    mc.fails.push_back({p + 1, 1});
    mc.fails.push_back({p + 5, 1});
    p += 7;
    std::string items;
    for (int k = 0; k < n; ++k) {
      std::string t;
      if (!part(*this, p, t)) return false;
      items += (k ? ", " : "") + t;
    }
    mc.pattern = "[" + items + "]";
    return true;
  }
  if (is(in, "MATCH_MAPPING")) {
    // MATCH_MAPPING; POP_JUMP_IF_FALSE f; GET_LEN; LOAD_CONST n; COMPARE_OP >=; POP_JUMP_IF_FALSE f;
    // LOAD_CONST keys; MATCH_KEYS; COPY 1; POP_JUMP_IF_NONE f; UNPACK_SEQUENCE n; <value parts>;
    // POP_TOP (the keys); POP_TOP (the mapping). Value parts: captures, `_`, constants, None.
    if (p + 10 >= bc.size() || !cond_false(p + 1) || !is(bc.at(p + 2), "GET_LEN") || !is(bc.at(p + 3), "LOAD_CONST") ||
        !is(bc.at(p + 4), "COMPARE_OP") || !cond_false(p + 5) || !is(bc.at(p + 6), "LOAD_CONST") ||
        !is(bc.at(p + 7), "MATCH_KEYS") || !is(bc.at(p + 8), "COPY") || bc.at(p + 8).arg != 1 || !is_cond_jump(p + 9) ||
        !has_name(p + 9, "_NONE") || has_name(p + 9, "NOT_NONE") || !is(bc.at(p + 10), "UNPACK_SEQUENCE"))
      return false;
    const int n = bc.at(p + 10).arg;
    const ConstDesc& keys = code.consts.at(bc.at(p + 6).arg);
    if (n < 1 || keys.kind != ConstDesc::Kind::Tuple || static_cast<int>(keys.items.size()) != n ||
        code.consts.at(bc.at(p + 3).arg).source != std::to_string(n) || (minor >= 12 ? bc.at(p + 4).arg >> 4 : bc.at(p + 4).arg) != 5)
      return false;
    mc.fails.push_back({p + 1, 1});
    mc.fails.push_back({p + 5, 1});
    mc.fails.push_back({p + 9, 3});  // the mapping, the keys, MATCH_KEYS's None
    p += 11;
    std::string items;
    for (int k = 0; k < n; ++k) {
      const ConstDesc& key = keys.items[k];
      if (key.source.empty() || key.kind == ConstDesc::Kind::Tuple) return false;
      std::string t;
      const int depth = n - 1 - k + 2;  // the values not matched yet, the keys, the mapping
      if (is_cond_jump(p) && has_name(p, "NOT_NONE")) {
        t = "None";
        mc.fails.push_back({p, depth});
        ++p;
      } else if (p + 2 < bc.size() && is(bc.at(p), "LOAD_CONST") && is(bc.at(p + 1), "COMPARE_OP") &&
                 (minor >= 12 ? bc.at(p + 1).arg >> 4 : bc.at(p + 1).arg) == 2 && cond_false(p + 2)) {
        const ConstDesc& v = code.consts.at(bc.at(p).arg);
        if (v.source.empty() || v.kind == ConstDesc::Kind::Tuple) return false;
        t = v.source;
        mc.fails.push_back({p + 2, depth});
        p += 3;
      } else if (!part(*this, p, t)) {
        return false;
      }
      items += (k ? ", " : "") + key.source + ": " + t;
    }
    if (p + 1 >= bc.size() || !is(bc.at(p), "POP_TOP") || !is(bc.at(p + 1), "POP_TOP")) return false;
    p += 2;
    mc.pattern = "{" + items + "}";
    return true;
  }
  if (is_store(in) && !copied) {  // an irrefutable capture (the last case)
    return part(*this, p, mc.pattern);
  }
  // value, True/False, or a class pattern: evaluate the loads before the test
  Stack s;
  std::vector<Stmt> none;
  RegionCtx c;
  c.pure = true;
  int q = p;
  for (; q < bc.size() && (std::strncmp(bc.at(q).name, "LOAD_", 5) == 0 || is(bc.at(q), "NOP")) && !is(bc.at(q), "LOAD_BUILD_CLASS"); ++q) {
    try {
      if (!exec(q, s, none, c)) return false;
    } catch (const NotPure&) {
      return false;
    }
  }
  if (q + 1 >= bc.size() || !none.empty()) return false;
  if (s.size() == 1 && (is(bc.at(q), "COMPARE_OP") || is(bc.at(q), "IS_OP")) && cond_false(q + 1)) {
    const bool eq = is(bc.at(q), "COMPARE_OP") ? (minor >= 12 ? bc.at(q).arg >> 4 : bc.at(q).arg) == 2 : bc.at(q).arg == 0;
    if (!eq) return false;
    mc.pattern = render(s[0]);
    mc.fails.push_back({q + 1, 0});
    p = q + 2;
    return true;
  }
  // <cls>; LOAD_CONST names; MATCH_CLASS npos; COPY 1; POP_JUMP_IF_NONE f; UNPACK_SEQUENCE n; parts
  if (s.size() == 2 && is(bc.at(q), "MATCH_CLASS") && s[1]->cst && s[1]->cst->kind == ConstDesc::Kind::Tuple &&
      q + 3 < bc.size() && is(bc.at(q + 1), "COPY") && bc.at(q + 1).arg == 1 && is_cond_jump(q + 2) &&
      has_name(q + 2, "_NONE") && !has_name(q + 2, "NOT_NONE") && is(bc.at(q + 3), "UNPACK_SEQUENCE")) {
    const int npos = bc.at(q).arg;
    const auto& names = s[1]->cst->items;
    const int n = bc.at(q + 3).arg;
    if (n != npos + static_cast<int>(names.size())) return false;
    mc.fails.push_back({q + 2, 1});  // the MATCH_CLASS result (None) stays
    p = q + 4;
    std::string args;
    for (int k = 0; k < n; ++k) {
      std::string t;
      if (!part(*this, p, t)) return false;
      if (k >= npos) {
        if (!names[k - npos].is_str || !is_identifier(names[k - npos].str)) return false;
        t = names[k - npos].str + "=" + t;
      }
      args += (k ? ", " : "") + t;
    }
    mc.pattern = wrap(s[0], kPrecAtom) + "(" + args + ")";
    return true;
  }
  return false;
}

// An or-pattern of value patterns (`case 1 | 2 | None`), at p: each alternative is COPY 1 and a
// value test on the copy whose failure goes to the next alternative, then JUMP_FORWARD S; the last
// alternative's failure goes to F: POP_TOP; JUMP_FORWARD <the next case>; S: POP_TOP (the value
// the or-pattern tested). On success p is after S's POP_TOP.
bool Decompiler::or_pattern(int& p, MatchCase& mc) {
  std::vector<std::string> alts;
  int S = -1, q = p;
  std::vector<std::pair<int, int>> copies;  // 3.12: each alternative's own copy of a small success path
  for (int guard = 0; guard < 64; ++guard) {
    if (q + 1 >= bc.size() || !is(bc.at(q), "COPY") || bc.at(q).arg != 1) return false;
    MatchCase alt;
    int r = q + 1;
    if (!match_pattern(r, true, alt) || alt.fails.size() != 1 || alt.fails[0].second != 0) return false;
    if (r < bc.size() && is(bc.at(r), "POP_TOP") && S < 0) {
      // 3.12 copies a small success path (the pops, the body, its return or raise) into every
      // alternative: identical straight-line copies; the last one is kept as the body
      const int fail_to = bc.at(alt.fails[0].first).target;
      if (fail_to <= r || (!copies.empty() && fail_to - r != copies[0].second - copies[0].first)) return false;
      for (int j = r; j < fail_to; ++j)
        if (bc.at(j).target >= 0 || is_cond_jump(j)) return false;
      const char* last = bc.at(fail_to - 1).name;
      if (std::strcmp(last, "RETURN_VALUE") && std::strcmp(last, "RETURN_CONST") && std::strcmp(last, "RAISE_VARARGS")) return false;
      for (int j = 0; !copies.empty() && j < fail_to - r; ++j)
        if (bc.at(copies[0].first + j).opcode != bc.at(r + j).opcode || bc.at(copies[0].first + j).arg != bc.at(r + j).arg) return false;
      copies.push_back({r, fail_to});
      alts.push_back(alt.pattern);
      if (fail_to < bc.size() && is(bc.at(fail_to), "COPY") && bc.at(fail_to).arg == 1) {
        q = fail_to;
        continue;
      }
      // the last alternative: its failure pops the tested value (F: POP_TOP) and goes on
      if (alts.size() < 2 || !is(bc.at(fail_to), "POP_TOP")) return false;
      for (size_t k = 0; k < alts.size(); ++k) mc.pattern += (k ? " | " : "") + alts[k];
      mc.fails.push_back({alt.fails[0].first, 1});
      p = r + 1;  // after the kept copy's POP_TOP of the tested value
      return true;
    }
    if (!copies.empty()) return false;
    if (r >= bc.size() || !is(bc.at(r), "JUMP_FORWARD")) return false;
    if (S < 0) S = bc.at(r).target;
    else if (S != bc.at(r).target) return false;
    alts.push_back(alt.pattern);
    const int fail_to = bc.at(alt.fails[0].first).target;
    if (fail_to != r + 1) return false;
    if (r + 1 < bc.size() && is(bc.at(r + 1), "COPY") && bc.at(r + 1).arg == 1) {
      q = r + 1;
      continue;
    }
    if (alts.size() < 2 || r + 3 >= bc.size() || !is(bc.at(r + 1), "POP_TOP") || !is(bc.at(r + 2), "JUMP_FORWARD") ||
        S != r + 3 || !is(bc.at(S), "POP_TOP"))
      return false;
    for (size_t k = 0; k < alts.size(); ++k) mc.pattern += (k ? " | " : "") + alts[k];
    mc.fails.push_back({r + 2, 0});  // the whole pattern's failure: on to the next case
    p = S + 1;
    return true;
  }
  return false;
}

int Decompiler::handle_match(int i, int hi, const RegionCtx& ctx, Stack& st, std::vector<Stmt>& out) {
  // triggered at COPY 1 with the subject pending at the statement level, or (a statement whose
  // only case is a class pattern, which tests the subject itself) at the loads of that pattern's
  // class and MATCH_CLASS
  if (ctx.pure || static_cast<int>(st.size()) != ctx.base + 1 || i + 1 >= bc.size()) return -2;
  if (is(bc.at(i), "COPY") && bc.at(i).arg == 1) {
    const auto& nx = bc.at(i + 1);
    const bool start = is(nx, "LOAD_CONST") || is(nx, "LOAD_NAME") || is(nx, "LOAD_GLOBAL") || is(nx, "LOAD_FAST") ||
                       is(nx, "LOAD_DEREF") || is(nx, "MATCH_SEQUENCE") || is(nx, "MATCH_MAPPING") || is(nx, "COPY") ||
                       (is_cond_jump(i + 1) && has_name(i + 1, "NOT_NONE"));
    if (!start) return -2;
  } else {
    int q = i;
    while (q < bc.size() && ((!std::strncmp(bc.at(q).name, "LOAD_", 5) && !is(bc.at(q), "LOAD_BUILD_CLASS")) || is(bc.at(q), "NOP")))
      ++q;
    if (q == i || q >= bc.size() || !is(bc.at(q), "MATCH_CLASS")) return -2;
  }
  ExP subject = st.back();
  std::vector<MatchCase> cases;
  int p = i;
  bool last_irrefutable = false;
  for (int guard = 0; guard < 256; ++guard) {
    MatchCase mc;
    bool copied = is(bc.at(p), "COPY") && bc.at(p).arg == 1;
    int q = p;
    // an or-pattern on the subject itself (its alternatives' copies: the case needs no copy of its
    // own, the cases after it do not use the subject), else one after the case's copy
    MatchCase alt;
    int q0 = p;
    if (or_pattern(q0, alt)) {
      copied = false;
      mc = alt;
      q = q0;
    } else {
      if (copied) ++p;
      q = p;
      q0 = p;
      if (copied && or_pattern(q0, alt)) {
        mc = alt;
        q = q0;
      } else if (!match_pattern(q, copied, mc)) {
        if (cases.empty()) return -2;
        fail("match statement with a pattern not rebuilt", p);
      }
    }
    mc.copied = copied;
    // a guard (only on a copied subject): conditions each jumping to the failure when false
    std::vector<ExP> conds;
    while (copied && !is(bc.at(q), "POP_TOP")) {
      Stack s2 = st;
      RegionCtx c2 = ctx;
      c2.pure = true;
      c2.stop_at_cond = true;
      c2.base = static_cast<int>(s2.size());
      c2.follow = -1;
      std::vector<Stmt> tmp;
      int r = -1;
      try {
        r = region(q, hi, c2, s2, tmp);
      } catch (const NotPure&) {
      } catch (const DecompileError&) {
      }
      if (r < 0 || r >= hi || !is_cond_jump(r) || !has_name(r, "FALSE") || has_name(r, "NONE") || !tmp.empty() ||
          static_cast<int>(s2.size()) != c2.base + 1)
        fail("match case guard not rebuilt", q);
      conds.push_back(s2.back());
      mc.fails.push_back({r, 0});
      q = r + 1;
    }
    for (size_t k = 0; k < conds.size(); ++k)
      mc.guard += (k ? " and " : "") + wrap(conds[k], kPrecAnd + 1);
    if (copied) {
      if (!is(bc.at(q), "POP_TOP")) fail("match case without its subject's pop", q);
      ++q;
    }
    mc.body = q;
    // the failure paths: `depth` POP_TOPs, then the next case
    for (auto& [j, depth] : mc.fails) {
      int t = bc.at(j).target, u = t;
      for (int k = 0; k < depth; ++k, ++u)
        if (u >= bc.size() || !is(bc.at(u), "POP_TOP")) fail("match case whose failure does not pop the pattern's values", j);
      if (mc.next < 0) mc.next = u;
      else if (mc.next != u) fail("match case whose failures go to different places", j);
      if (mc.cleanup < 0 || t < mc.cleanup) mc.cleanup = t;
    }
    cases.push_back(mc);
    if (mc.fails.empty()) {  // irrefutable: the last case
      last_irrefutable = true;
      break;
    }
    if (!copied) {  // the last case consumed the subject
      // `case _` after it needs no subject: the compiler marks its line with a NOP where the failure
      // goes. It is that case (not the code after the statement) when no case's body goes on there:
      // each ends in a jump past it, a return or a raise.
      const int n = mc.next;
      bool wildcard = n >= 0 && n + 1 < hi && is(bc.at(n), "NOP");
      for (const auto& c : cases) {
        if (!wildcard) break;
        const int e = c.cleanup >= 0 ? c.cleanup - 1 : -1;
        const bool past = e >= 0 && is_uncond_jump(e) && bc.at(e).target > n;
        const bool ends = e >= 0 && (is(bc.at(e), "RETURN_VALUE") || is(bc.at(e), "RETURN_CONST") || is(bc.at(e), "RAISE_VARARGS"));
        wildcard = past || ends;
      }
      if (wildcard) {
        MatchCase w;
        w.pattern = "_";
        w.body = n + 1;
        cases.push_back(w);
        last_irrefutable = true;
      }
      break;
    }
    p = mc.next;
  }
  // after the last refutable case the subject is popped (when that case copied it) and the code
  // after the statement follows
  int join = -1;
  if (!last_irrefutable) {
    join = cases.back().next;
    if (cases.back().copied) {  // the subject's pop
      if (!is(bc.at(join), "POP_TOP")) fail("match statement without its subject's pop", join);
      ++join;
    }
  }
  // the bodies' ends: a jump to the join (or the code after the statement)
  for (auto& mc : cases) {
    if (mc.cleanup < 0) continue;
    int e = mc.cleanup - 1;
    if (is_uncond_jump(e) && bc.at(e).target > e) {
      if (join < 0) join = bc.at(e).target;
      else if (!same_label(join, bc.at(e).target)) fail("match cases continuing at different places", e);
    }
  }
  Stmt m;
  m.kind = Stmt::Kind::Match;
  m.text = "match " + wrap(subject, kPrecLambda + 1);
  st.pop_back();
  for (size_t k = 0; k < cases.size(); ++k) {
    const MatchCase& mc = cases[k];
    Stmt c;
    c.kind = Stmt::Kind::Case;
    c.text = "case " + mc.pattern + (mc.guard.empty() ? "" : " if " + mc.guard);
    int end = mc.cleanup >= 0 ? mc.cleanup : (join >= 0 ? join : hi);
    RegionCtx bctx = ctx;
    bctx.follow = join;
    Stack sb = st;
    int r = region(mc.body, end, bctx, sb, c.body);
    if (r >= 0 && sb.size() != st.size()) fail("match case body leaving a value", mc.body);
    if (mc.fails.empty() && join < 0) {  // the last, irrefutable case ran on to the end
      m.body.push_back(c);
      out.push_back(m);
      return r < 0 ? -1 : hi;
    }
    m.body.push_back(c);
  }
  out.push_back(m);
  if (join < 0) return -1;
  if (join <= hi) return join;
  if (ctx.follow >= 0 && same_label(join, ctx.follow)) return hi;
  fail("match statement continuing outside its block", i);
}

}  // namespace kiln::decompiler
