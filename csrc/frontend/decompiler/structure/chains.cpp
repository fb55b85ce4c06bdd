// Comparison chains: `a < b < c` compiles to SWAP 2; COPY 2; COMPARE_OP and a conditional jump
// per link, with a cleanup block that only the chain's own jumps reach; rebuilt as one Compare
// expression, in condition form (ending at the final conditional jump) or value form.
#include <algorithm>
#include <cstring>

#include "frontend/decompiler/decompiler_state.h"

namespace kiln::decompiler {

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

}  // namespace kiln::decompiler
