// Stack effects of straight-line instructions: the dispatcher (Decompiler::exec) and the value
// instructions: loads, stack shuffles, operators, comparisons, subscripts, displays and
// iterators, each turning the symbolic stack of expressions into new expressions. Calls,
// f-strings, function objects and imports are in calls.cpp; stores, deletes and unpacking (the
// simple statements) in stores.cpp.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "frontend/decompiler/stack/stack_helpers.h"

namespace kiln::decompiler {

namespace {

ExP binop(const ExP& l, const std::string& op, const ExP& r) {
  int p = kPrecArith;
  if (op == "*" || op == "/" || op == "//" || op == "%" || op == "@") p = kPrecTerm;
  else if (op == "<<" || op == ">>") p = kPrecShift;
  else if (op == "&") p = kPrecBitAnd;
  else if (op == "^") p = kPrecBitXor;
  else if (op == "|") p = kPrecBitOr;
  else if (op == "**") p = kPrecPower;
  if (op == "**") return make_ex(wrap(l, kPrecPower + 1) + " ** " + wrap(r, kPrecUnary), kPrecPower);
  return make_ex(wrap(l, p) + " " + op + " " + wrap(r, p + 1), p);
}

ExP starred(const ExP& x) {
  auto s = make_ex("", kPrecAtom, ExKind::Starred);
  s->a = x;
  return s;
}

ExP yield_ex(const ExP& v) {
  bool none = v->kind == ExKind::Const && v->cst && v->cst->is_none;
  auto e = make_ex(none ? "yield" : "yield " + wrap(v, kPrecTuple), kPrecYield);
  e->name = "<yield>";
  e->a = v;
  return e;
}

}  // namespace

namespace stackfx {

ExP pop(Stack& st, const Decompiler& d, int i) {
  if (st.empty()) d.fail("stack underflow", i);
  ExP e = st.back();
  st.pop_back();
  return e;
}

ExP display(char kind) {
  auto e = make_ex("", kPrecAtom, ExKind::Display);
  e->display = kind;
  return e;
}

std::string attr_base(const ExP& obj) {
  std::string t = wrap(obj, kPrecAtom);
  if (obj->kind == ExKind::Const && !t.empty() && t[0] >= '0' && t[0] <= '9') return "(" + t + ")";
  return t;
}

}  // namespace stackfx

using stackfx::attr_base;
using stackfx::display;
using stackfx::swap_assignment;

bool Decompiler::exec(int i, Stack& st, std::vector<Stmt>& out, const RegionCtx& ctx) {
  const frontend::Instruction& in = bc.at(i);
  std::string_view op = in.name;
  const int arg = in.arg;
  auto P = [&]() { return stackfx::pop(st, *this, i); };
  auto impure = [&]() {
    if (ctx.pure) throw NotPure{};
  };
  auto push_name = [&](const std::string& n) { st.push_back(make_ex(n, kPrecAtom, ExKind::Name)); };

  if (op == "NOP" || op == "RESUME" || op == "PRECALL" || op == "COPY_FREE_VARS" || op == "MAKE_CELL" || op == "CACHE" ||
      op == "EXTENDED_ARG") return true;
  if (op == "SETUP_ANNOTATIONS") return true;  // a class or module body that annotates names
  if (op == "LOAD_BUILD_CLASS") { st.push_back(make_marker(ExKind::BuildClass, "__build_class__")); return true; }
  if (op == "RETURN_GENERATOR") { st.push_back(make_marker(ExKind::Dummy)); return true; }
  if (op == "PUSH_NULL") { st.push_back(make_marker(ExKind::Null)); return true; }
  if (op == "LOAD_CONST") { st.push_back(const_ex(code.consts.at(arg))); return true; }
  if (op == "LOAD_FAST" || op == "LOAD_FAST_CHECK" || op == "LOAD_DEREF" || op == "LOAD_CLASSDEREF") {
    const std::string n = local(arg);
    for (auto& [bn, bv] : bound_locals)  // a generic scope's .defaults / .kwdefaults (generics.cpp)
      if (bn == n) {
        st.push_back(bv);
        return true;
      }
    push_name(n);
    return true;
  }
  // 3.12: a class body reads a free variable (or a name it may bind itself) through its locals:
  // LOAD_LOCALS; LOAD_FROM_DICT_OR_DEREF name (LOAD_CLASSDEREF before 3.12)
  if (op == "LOAD_LOCALS") { st.push_back(make_marker(ExKind::Dummy, "<locals>")); return true; }
  if (op == "LOAD_FROM_DICT_OR_DEREF" || op == "LOAD_FROM_DICT_OR_GLOBALS") {
    ExP m = P();
    // (or, in an annotation scope inside a class body, the class namespace's cell: a generic
    // method's annotations and bounds read the class's names through it)
    const bool classdict = m->kind == ExKind::Name && m->text == "__classdict__" && op == "LOAD_FROM_DICT_OR_GLOBALS";
    if ((m->kind != ExKind::Dummy || m->text != "<locals>") && !classdict) fail(std::string(op) + " without LOAD_LOCALS", i);
    const std::string n = op == "LOAD_FROM_DICT_OR_DEREF" ? local(arg) : name(arg);
    // a generic class's type parameters (PEP 695) live in its `<generic parameters of C>` scope,
    // which a class body decompiled alone does not have
    // (decompiled with that scope, the class statement's header holds them: generics.cpp)
    if (n == ".type_params" && !generic_class_) fail("generic class body (its type parameters are in the enclosing scope)", i);
    push_name(n);
    return true;
  }
  if (op == "LOAD_CLOSURE") { auto e = make_marker(ExKind::Dummy, local(arg)); st.push_back(e); return true; }
  if (op == "LOAD_FAST_AND_CLEAR") { auto e = make_marker(ExKind::Saved); e->name = local(arg); st.push_back(e); return true; }
  if (op == "LOAD_GLOBAL") {
    if (arg & 1) st.push_back(make_marker(ExKind::Null));
    push_name(name(arg >> 1));
    return true;
  }
  if (op == "LOAD_NAME") { push_name(name(arg)); return true; }
  if (op == "LOAD_ATTR" || op == "LOAD_METHOD") {
    ExP obj = P();
    bool method = op == "LOAD_METHOD" || (minor >= 12 && (arg & 1));
    const std::string& attr = name(minor >= 12 && op == "LOAD_ATTR" ? arg >> 1 : arg);
    if (method) st.push_back(make_marker(ExKind::Null));
    st.push_back(make_ex(attr_base(obj) + "." + attr));
    return true;
  }
  if (op == "LOAD_SUPER_ATTR") {
    ExP self = P(), cls = P(), sup = P();
    if (!st.empty() && st.back()->kind == ExKind::Null) st.pop_back();
    std::string call = (arg & 2) ? render(sup) + "(" + render(cls) + ", " + render(self) + ")" : render(sup) + "()";
    if (arg & 1) st.push_back(make_marker(ExKind::Null));
    st.push_back(make_ex(call + "." + name(arg >> 2)));
    return true;
  }
  if (op == "LOAD_ASSERTION_ERROR") { st.push_back(make_ex("AssertionError", kPrecAtom, ExKind::AssertError)); return true; }
  if (op == "POP_TOP") {
    ExP e = P();
    switch (e->kind) {
      case ExKind::Null: case ExKind::Iter: case ExKind::Dummy: case ExKind::Saved: case ExKind::Module:
        return true;
      case ExKind::ImportAttr:  // the walk of `import a.b.c as x`, done once x is stored
        if (!e->name.empty() && e->name[0] == '.') return true;
        break;
      case ExKind::Sink:
        if (e->text == "<exc>" || e->text == "<with>") return true;
        fail("discarded assignment target", i);
      default: break;
    }
    // a value of the enclosing expression consumed inside a branch (3.12 `a and b`: COPY 1;
    // POP_JUMP_IF_FALSE; POP_TOP): no statement
    if (static_cast<int>(st.size()) < ctx.base) return true;
    impure();
    if (e->name == "<yield>") {
      Stmt s = line(e->text);
      s.kind = Stmt::Kind::Append;
      s.is_yield = true;
      s.e1 = e->a;
      out.push_back(s);
      return true;
    }
    if (e->kind == ExKind::Function) {
      fail("function object discarded", i);
    }
    out.push_back(line(render(e)));
    return true;
  }
  if (op == "COPY") {
    if (arg < 1 || arg > static_cast<int>(st.size())) fail("COPY beyond the stack", i);
    st.push_back(st[st.size() - arg]);
    return true;
  }
  if (op == "SWAP") {
    if (!ctx.pure) {
      int j = swap_assignment(*this, i, st, out);
      if (j >= 0) {
        swap_skip_to = j;
        return true;
      }
    }
    if (arg < 2 || arg > static_cast<int>(st.size())) fail("SWAP beyond the stack", i);
    std::swap(st.back(), st[st.size() - arg]);
    return true;
  }
  if (op == "UNARY_NEGATIVE" || op == "UNARY_INVERT" || op == "UNARY_POSITIVE") {
    ExP v = P();
    const char* s = op == "UNARY_NEGATIVE" ? "-" : op == "UNARY_INVERT" ? "~" : "+";
    st.push_back(make_ex(std::string(s) + wrap(v, kPrecUnary), kPrecUnary));
    return true;
  }
  if (op == "UNARY_NOT") { st.push_back(negate(P())); return true; }
  if (op == "BINARY_OP") {
    ExP r = P(), l = P();
    std::string t = binary_op_text(arg);
    if (t.empty()) fail("unknown BINARY_OP", i);
    if (t.back() == '=' && t != "==") {
      auto e = make_ex("", kPrecAtom, ExKind::Inplace);
      e->a = l;
      e->b = r;
      e->op = arg;
      st.push_back(e);
    } else {
      st.push_back(binop(l, t, r));
    }
    return true;
  }
  if (op == "COMPARE_OP") {
    static const char* ops[] = {"<", "<=", "==", "!=", ">", ">="};
    int k = minor >= 12 ? arg >> 4 : arg;
    if (k < 0 || k > 5) fail("unknown COMPARE_OP", i);
    ExP r = P(), l = P();
    st.push_back(compare_ex(l, ops[k], r));
    return true;
  }
  if (op == "IS_OP" || op == "CONTAINS_OP") {
    ExP r = P(), l = P();
    // `x in {1, 2}`: the compiler made the set display a frozenset constant
    if (op == "CONTAINS_OP" && r->cst && r->cst->kind == ConstDesc::Kind::FrozenSet && !r->cst->items.empty()) {
      std::string t;
      for (auto& c : r->cst->items) t += (t.empty() ? "" : ", ") + wrap(const_ex(c), kPrecLambda + 1);
      r = make_ex("{" + t + "}");
    }
    std::string o = op == "IS_OP" ? (arg ? "is not" : "is") : (arg ? "not in" : "in");
    st.push_back(compare_ex(l, o, r));
    return true;
  }
  if (op == "BINARY_SUBSCR") {
    ExP idx = P(), obj = P();
    st.push_back(make_ex(attr_base(obj) + "[" + subscript_text(idx) + "]"));
    return true;
  }
  if (op == "BINARY_SLICE") {
    ExP stop = P(), start = P(), obj = P();
    auto s = make_ex("", kPrecAtom, ExKind::Slice);
    s->items = {start, stop};
    st.push_back(make_ex(attr_base(obj) + "[" + subscript_text(s) + "]"));
    return true;
  }
  if (op == "BUILD_SLICE") {
    auto s = make_ex("", kPrecAtom, ExKind::Slice);
    s->items.resize(arg);
    for (int k = arg - 1; k >= 0; --k) s->items[k] = P();
    st.push_back(s);
    return true;
  }
  if (op == "BUILD_TUPLE" || op == "BUILD_LIST" || op == "BUILD_SET") {
    auto e = display(op == "BUILD_TUPLE" ? '(' : op == "BUILD_LIST" ? '[' : '{');
    e->items.resize(arg);
    for (int k = arg - 1; k >= 0; --k) e->items[k] = P();
    // a tuple of closure cells (MAKE_FUNCTION's closure) stays a marker
    if (arg > 0 && e->items[0]->kind == ExKind::Dummy && !e->items[0]->text.empty()) {
      st.push_back(make_marker(ExKind::Dummy));
      return true;
    }
    st.push_back(e);
    return true;
  }
  if (op == "BUILD_MAP") {
    auto e = display('d');
    e->items.resize(arg);
    e->keys.resize(arg);
    for (int k = arg - 1; k >= 0; --k) {
      e->items[k] = P();
      e->keys[k] = P();
    }
    st.push_back(e);
    return true;
  }
  if (op == "BUILD_CONST_KEY_MAP") {
    ExP keys = P();
    if (!keys->cst || keys->cst->kind != ConstDesc::Kind::Tuple || static_cast<int>(keys->cst->items.size()) != arg)
      fail("BUILD_CONST_KEY_MAP without a constant key tuple", i);
    auto e = display('d');
    e->items.resize(arg);
    for (int k = arg - 1; k >= 0; --k) e->items[k] = P();
    for (int k = 0; k < arg; ++k) e->keys.push_back(const_ex(keys->cst->items[k]));
    st.push_back(e);
    return true;
  }
  if (op == "LIST_APPEND" || op == "SET_ADD" || op == "MAP_ADD") {
    ExP v = P(), key;
    if (op == "MAP_ADD") key = P();
    if (arg > static_cast<int>(st.size())) fail("append beyond the stack", i);
    ExP target = st[st.size() - arg];
    if (arg == 1 && target->kind == ExKind::Display) {
      if (key) { target->keys.push_back(key); }
      target->items.push_back(v);
      return true;
    }
    impure();
    Stmt s;
    s.kind = Stmt::Kind::Append;
    s.e1 = v;
    s.e2 = key;
    s.e3 = target;
    s.text = "<append>";
    out.push_back(s);
    return true;
  }
  if (op == "LIST_EXTEND" || op == "SET_UPDATE" || op == "DICT_UPDATE" || op == "DICT_MERGE") {
    ExP v = P();
    if (arg > static_cast<int>(st.size())) fail("extend beyond the stack", i);
    ExP target = st[st.size() - arg];
    if (target->kind != ExKind::Display) fail(std::string(op) + " on a non-display", i);
    if (target->display == 'd') {
      if (v->kind == ExKind::Display && v->display == 'd') {
        for (size_t k = 0; k < v->items.size(); ++k) target->keys.push_back(v->keys[k]), target->items.push_back(v->items[k]);
      } else {
        target->keys.push_back(nullptr);
        target->items.push_back(v);
      }
      return true;
    }
    if (v->kind == ExKind::Const && v->cst && (v->cst->kind == ConstDesc::Kind::Tuple || v->cst->kind == ConstDesc::Kind::FrozenSet)) {
      for (auto& c : v->cst->items) target->items.push_back(const_ex(c));
      return true;
    }
    target->items.push_back(starred(v));
    return true;
  }
  if (op == "LIST_TO_TUPLE" || (op == "CALL_INTRINSIC_1" && arg == 6)) {
    ExP v = P();
    if (v->kind != ExKind::Display) fail("LIST_TO_TUPLE of a non-display", i);
    auto t = display('(');
    t->items = v->items;
    st.push_back(t);
    return true;
  }
  if (op == "ASYNC_GEN_WRAP" || (op == "CALL_INTRINSIC_1" && arg == 4)) return true;  // an async generator's yielded value
  if (op == "CALL_INTRINSIC_1" && arg == 5) {
    ExP v = P();
    st.push_back(make_ex("+" + wrap(v, kPrecUnary), kPrecUnary));
    return true;
  }
  if (op == "CHECK_EXC_MATCH") {
    ExP type = P();
    auto e = make_ex("<excmatch>");
    e->a = type;
    st.push_back(e);
    return true;
  }
  if (op == "GET_AITER") {  // not an async for statement's (loops.cpp): an async comprehension's iterator
    ExP v = P();
    auto it = make_marker(ExKind::Iter);
    it->a = v;
    it->name = "<aiter>";
    st.push_back(it);
    return true;
  }
  if (op == "GET_ITER") {
    ExP v = P();
    if (v->kind == ExKind::Iter) { st.push_back(v); return true; }
    auto it = make_marker(ExKind::Iter);
    it->a = v;
    st.push_back(it);
    return true;
  }
  if (op == "YIELD_VALUE") {
    impure();
    st.push_back(yield_ex(P()));
    return true;
  }
  if (exec_call(i, op, arg, st)) return true;
  return exec_store(i, op, arg, st, out, ctx);
}

}  // namespace kiln::decompiler
