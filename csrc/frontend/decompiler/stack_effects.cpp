// Stack effects of straight-line instructions: loads, operators, calls, displays, f-strings,
// imports and stores, each turning the symbolic stack of expressions into new expressions or
// into simple statements (assignments, expression statements, del, raise, return).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "frontend/decompiler/decompiler_state.h"

namespace kiln::decompiler {

namespace {

bool is_trivial(const ExP& e) { return e->kind == ExKind::Name || e->kind == ExKind::Const; }

ExP pop(Stack& st, const Decompiler& d, int i) {
  if (st.empty()) d.fail("stack underflow", i);
  ExP e = st.back();
  st.pop_back();
  return e;
}

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

ExP display(char kind) {
  auto e = make_ex("", kPrecAtom, ExKind::Display);
  e->display = kind;
  return e;
}

ExP starred(const ExP& x) {
  auto s = make_ex("", kPrecAtom, ExKind::Starred);
  s->a = x;
  return s;
}

std::string attr_base(const ExP& obj) {
  std::string t = wrap(obj, kPrecAtom);
  if (obj->kind == ExKind::Const && !t.empty() && t[0] >= '0' && t[0] <= '9') return "(" + t + ")";
  return t;
}

// The positional arguments a tuple-valued expression stands for in f(*args) (items or `*x`).
std::vector<std::string> star_args(const ExP& args) {
  std::vector<std::string> out;
  if (args->kind == ExKind::Display && (args->display == '(' || args->display == '[')) {
    for (auto& it : args->items) out.push_back(it->kind == ExKind::Starred ? render(it) : wrap(it, kPrecLambda));
  } else if (args->kind == ExKind::Const && args->cst && args->cst->kind == ConstDesc::Kind::Tuple) {
    for (auto& c : args->cst->items) out.push_back(wrap(const_ex(c), kPrecLambda));
  } else {
    out.push_back("*" + wrap(args, kPrecBitOr));
  }
  return out;
}

std::vector<std::string> star_kwargs(const ExP& kw) {
  std::vector<std::string> out;
  if (kw->kind == ExKind::Display && kw->display == 'd') {
    for (size_t i = 0; i < kw->items.size(); ++i) {
      const ExP& k = kw->keys[i];
      if (!k) out.push_back("**" + wrap(kw->items[i], kPrecBitOr));
      else if (k->kind == ExKind::Const && k->cst && k->cst->is_str && is_identifier(k->cst->str))
        out.push_back(k->cst->str + "=" + wrap(kw->items[i], kPrecLambda));
      else out.push_back("**{" + wrap(k, kPrecLambda + 1) + ": " + wrap(kw->items[i], kPrecLambda + 1) + "}");
    }
  } else {
    out.push_back("**" + wrap(kw, kPrecBitOr));
  }
  return out;
}

ExP yield_ex(const ExP& v) {
  bool none = v->kind == ExKind::Const && v->cst && v->cst->is_none;
  auto e = make_ex(none ? "yield" : "yield " + wrap(v, kPrecTuple), kPrecYield);
  e->name = "<yield>";
  e->a = v;
  return e;
}

}  // namespace

static bool mentions(const std::string& text, const std::string& name);

static std::string render_safe(const ExP& e) {
  try {
    return render(e);
  } catch (const DecompileError&) {
    return e->text;
  }
}

// Assigns `value` to the target `target` (source text), emitting the statement.
static void store(Decompiler& d, int i, const std::string& target, bool is_name, Stack& st, ExP value,
                  std::vector<Stmt>& out, int base) {
  // the next target of a chained assignment `a = b = v`: the statement that assigned v is the last
  // one emitted; it gains this target
  if (value->chain_out == &out && value->chain_index + 1 == out.size() && out.back().kind == Stmt::Kind::Line) {
    value->chain_lhs += " = " + target;
    out.back().text = value->chain_lhs + " = " + value->chain_rhs;
    return;
  }
  if (value->kind == ExKind::Chain) d.fail("a chained assignment's value used elsewhere", i);
  switch (value->kind) {
    case ExKind::Sink: {
      auto s = value->sink;
      if (s->kind == SinkState::Kind::Target) {
        s->targets[0] = target;
        s->filled = 1;
        return;
      }
      s->targets[value->sink_index] = target;
      if (++s->filled < static_cast<int>(s->targets.size())) return;
      // complete: fill the parent or emit
      std::shared_ptr<SinkState> cur = s;
      while (cur->parent) {
        auto p = cur->parent;
        p->targets[p->kind == SinkState::Kind::Target ? 0 : cur->parent_index] = cur->kind == SinkState::Kind::Unpack && p->kind == SinkState::Kind::Unpack ? "(" + cur->result() + ")" : cur->result();
        if (p->kind == SinkState::Kind::Target) { p->filled = 1; return; }
        if (++p->filled < static_cast<int>(p->targets.size())) return;
        cur = p;
      }
      Stmt s2 = line(cur->result() + " = " + wrap(cur->value, kPrecTuple));
      out.push_back(s2);
      return;
    }
    case ExKind::Function: {
      const FunctionInfo& fn = *value->fn;
      if (fn.code->name == "<lambda>" && fn.decorators.empty()) {
        out.push_back(line(target + " = " + d.lambda_source(fn)));
      } else {
        if (!is_identifier(fn.code->name)) d.fail("function whose name is not an identifier", i);
        out.push_back(line(d.function_source(fn, fn.code->name)));
        if (target != d.mangled(fn.code->name)) out.push_back(line(target + " = " + fn.code->name));
      }
      return;
    }
    case ExKind::Class: {
      const std::string& cname = value->name;
      if (!is_identifier(cname)) d.fail("class whose name is not an identifier", i);
      out.push_back(line(d.class_source(*value->fn, cname, value->text)));
      if (target != d.mangled(cname)) out.push_back(line(target + " = " + cname));
      return;
    }
    case ExKind::Inplace: {
      if (value->a->text != target && render(value->a) != target) d.fail("augmented assignment to a different target", i);
      out.push_back(line(target + " " + binary_op_text(value->op) + " " + wrap(value->b, kPrecTuple)));
      return;
    }
    case ExKind::Module: {
      std::string mod = value->name;
      std::string first = mod.substr(0, mod.find('.'));
      std::string dots(value->level, '.');
      if (value->level > 0 || (value->fromlist && !(value->fromlist->cst && value->fromlist->cst->is_none)))
        d.fail("import of a module with a from-list stored directly", i);
      if (target == first) out.push_back(line("import " + mod));
      else if (mod.find('.') == std::string::npos) out.push_back(line("import " + mod + " as " + target));
      else d.fail("`import a.b as c` form", i);
      return;
    }
    case ExKind::ImportAttr: {
      const ExP& m = value->a;
      if (m->fromlist && m->fromlist->cst && m->fromlist->cst->is_none) {
        // `import a.b.c as x` (no from-list): the walk must be the module's own path below `a`
        const size_t dot = m->name.find('.');
        if (m->level != 0 || dot == std::string::npos || m->name.substr(dot + 1) != value->name)
          d.fail("import of an attribute of a module imported without a from-list", i);
        out.push_back(line("import " + m->name + " as " + target));
        return;
      }
      std::string src = std::string(m->level, '.') + m->name;
      std::string item = value->name + (target == value->name ? "" : " as " + target);
      // `from m import a, b`: the names of one IMPORT_NAME join one statement
      if (!out.empty() && out.back().kind == Stmt::Kind::Line && out.back().e1 == m) out.back().text += ", " + item;
      else {
        out.push_back(line("from " + src + " import " + item));
        out.back().e1 = m;
      }
      return;
    }
    case ExKind::Saved: return;  // 3.12: restoring an inlined comprehension's variable
    case ExKind::Null: case ExKind::Iter: case ExKind::WithExit: case ExKind::Dummy: case ExKind::CodeRef:
    case ExKind::Accumulator: case ExKind::BuildClass:
      d.fail("store of a value with no source form", i);
    default: break;
  }
  // values of the same statement evaluated before this one and still pending (`o.a, o.b = f(), g()`
  // stores o.b first): separate statements would evaluate them in another order
  for (size_t k = std::max(base, 0); k < st.size(); ++k) {
    const ExP& e = st[k];
    if (e == value || is_trivial(e)) continue;
    switch (e->kind) {
      case ExKind::Null: case ExKind::Iter: case ExKind::Sink: case ExKind::WithExit: case ExKind::Dummy:
      case ExKind::Saved: case ExKind::Accumulator: case ExKind::Chain: case ExKind::BuildClass: case ExKind::Module:
        continue;
      default: d.fail("an assignment while values evaluated before it are pending (a tuple assignment to attributes or items)", i);
    }
  }
  // a value still on the stack that reads the variable would see the new value
  if (is_name)
    for (auto& e : st)
      if (e != value && !e->text.empty() && e->kind != ExKind::Dummy && e->kind != ExKind::Sink && mentions(render_safe(e), target))
        d.fail("a value read before an assignment to the same name (" + target + ")", i);
  // chained assignment / assignment expression: the value is still on the stack
  bool dup = false;
  for (auto& e : st) dup |= e == value;
  std::string rhs = value->kind == ExKind::Display && value->display == '(' ? render(value) : wrap(value, kPrecTuple);
  if (value->name == "<yield>") rhs = value->text;
  out.push_back(line(target + " = " + rhs));
  if (target == "__doc__") out.back().e1 = value;  // a class body's docstring, if a string constant
  if (dup) {
    // kept for the next target of `a = b = v`; a name also reads back as the value (`(a := v)`)
    auto n = is_name ? make_ex(target, kPrecAtom, ExKind::Name) : make_marker(ExKind::Chain, "<chain>");
    if (is_trivial(value)) n = std::make_shared<Ex>(*value);
    n->chain_out = &out;
    n->chain_index = out.size() - 1;
    n->chain_lhs = target;
    n->chain_rhs = rhs;
    for (auto& e : st)
      if (e == value) e = n;
  }
}

// True when `text` reads the variable `name` (a whole identifier, not an attribute).
static bool mentions(const std::string& text, const std::string& name) {
  auto ident = [](char c) { return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || (c & 0x80); };
  for (size_t p = text.find(name); p != std::string::npos; p = text.find(name, p + 1)) {
    bool left = p == 0 || (!ident(text[p - 1]) && text[p - 1] != '.');
    bool right = p + name.size() >= text.size() || !ident(text[p + name.size()]);
    if (left && right) return true;
  }
  return false;
}

// `a, b = b, a`: 3.11+ compiles small tuple assignments to loads, SWAPs and stores. Rebuilt as
// one tuple assignment, so no value is read after a target it depends on was assigned.
static int swap_assignment(Decompiler& d, int i, Stack& st, std::vector<Stmt>& out) {
  int j = i;
  Stack s = st;
  while (j < d.bc.size() && !std::strcmp(d.bc.at(j).name, "SWAP")) {
    int n = d.bc.at(j).arg;
    if (n < 2 || n > static_cast<int>(s.size())) return -1;
    std::swap(s.back(), s[s.size() - n]);
    ++j;
  }
  const bool swapped = j > i;
  std::vector<std::string> targets, values;
  std::vector<ExP> stored;
  while (j < d.bc.size()) {
    const auto& in = d.bc.at(j);
    bool fast = !std::strcmp(in.name, "STORE_FAST") || !std::strcmp(in.name, "STORE_DEREF");
    bool glob = !std::strcmp(in.name, "STORE_GLOBAL") || !std::strcmp(in.name, "STORE_NAME");
    if (!fast && !glob) break;
    if (s.empty()) return -1;
    ExP v = s.back();
    if (v->kind != ExKind::Value && v->kind != ExKind::Name && v->kind != ExKind::Const && v->kind != ExKind::Compare &&
        v->kind != ExKind::Not && v->kind != ExKind::Display && v->kind != ExKind::FString)
      return -1;
    for (auto& o : stored)
      if (o == v) return -1;  // chained assignment
    stored.push_back(v);
    s.pop_back();
    targets.push_back(fast ? d.local(in.arg) : d.name(in.arg));
    if (!std::strcmp(in.name, "STORE_GLOBAL")) d.globals_declared.insert(targets.back());
    values.push_back(wrap(v, kPrecLambda + 1));
    ++j;
  }
  if (targets.size() < 2) return -1;
  bool hazard = false;
  for (size_t a = 0; a < targets.size(); ++a)
    for (size_t b = a + 1; b < targets.size(); ++b) hazard |= mentions(values[b], targets[a]);
  for (auto& e : s)
    for (auto& t : targets) hazard |= !e->text.empty() && mentions(e->text, t);
  (void)hazard;
  // without SWAPs the compiler stored the targets of `a, b = x, y` last first (it reorders the
  // stores instead of swapping the values): the first target takes the deepest value
  if (!swapped) {
    std::reverse(targets.begin(), targets.end());
    std::reverse(values.begin(), values.end());
  }
  std::string t, v;
  for (size_t k = 0; k < targets.size(); ++k) t += (k ? ", " : "") + targets[k], v += (k ? ", " : "") + values[k];
  out.push_back(line(t + " = " + v));
  st = s;
  return j;
}

static bool is_marker(const ExP& e) {
  switch (e->kind) {
    case ExKind::Null: case ExKind::Iter: case ExKind::Sink: case ExKind::WithExit: case ExKind::Dummy:
    case ExKind::Saved: case ExKind::Accumulator: case ExKind::Chain: case ExKind::BuildClass: case ExKind::Module:
      return true;
    default: return false;
  }
}

// `x[i], x[j] = x[j], x[i]` / `o.a, o.b = f(), g()`: a store at i while other values of the same
// statement are pending. Follows the stores (and the loads of their targets) until every pending
// value is stored and emits one tuple assignment, targets and values in the values' evaluation
// order. Returns the index after the last store, or -1 when the store at i is not one of these.
static int tuple_store(Decompiler& d, int i, Stack& st, std::vector<Stmt>& out, const RegionCtx& ctx) {
  // the values: what lies above the statement's base, less the target's object (and index)
  const std::string_view first = d.bc.at(i).name;
  const size_t nt = first == "STORE_ATTR" ? 1 : first == "STORE_SUBSCR" ? 2 : 0;
  if (st.size() < nt + 1) return -1;
  std::vector<ExP> group;
  for (size_t k = std::max(ctx.base, 0); k < st.size() - nt; ++k)
    if (!is_marker(st[k])) group.push_back(st[k]);
  if (group.size() < 2 || group.back() != st[st.size() - 1 - nt]) return -1;
  for (size_t a = 0; a < group.size(); ++a)
    for (size_t b = a + 1; b < group.size(); ++b)
      if (group[a] == group[b]) return -1;  // a duplicated value: a chained assignment
  Stack s = st;
  std::vector<std::pair<ExP, std::string>> parts;
  std::vector<Stmt> scratch;
  RegionCtx pure = ctx;
  pure.pure = true;
  int j = i;
  auto P = [&]() {
    if (s.empty()) d.fail("stack underflow", j);
    ExP e = s.back();
    s.pop_back();
    return e;
  };
  while (parts.size() < group.size()) {
    if (j >= d.bc.size()) return -1;
    const auto& in = d.bc.at(j);
    std::string_view op = in.name;
    if (op == "STORE_FAST" || op == "STORE_DEREF" || op == "STORE_NAME" || op == "STORE_GLOBAL") {
      std::string n = op == "STORE_FAST" || op == "STORE_DEREF" ? d.local(in.arg) : d.name(in.arg);
      if (op == "STORE_GLOBAL") d.globals_declared.insert(n);
      if (op == "STORE_DEREF" && std::find(d.code.freevars.begin(), d.code.freevars.end(), n) != d.code.freevars.end())
        d.nonlocals_declared.insert(n);
      ExP v = P();
      parts.push_back({v, n});
    } else if (op == "STORE_ATTR") {
      ExP obj = P(), v = P();
      parts.push_back({v, attr_base(obj) + "." + d.name(in.arg)});
    } else if (op == "STORE_SUBSCR") {
      ExP idx = P(), obj = P(), v = P();
      parts.push_back({v, attr_base(obj) + "[" + subscript_text(idx) + "]"});
    } else if (op == "SWAP" || op == "COPY" || op == "NOP" || op.substr(0, 5) == "LOAD_" || op == "BINARY_SUBSCR") {
      // (a target's object and index; SWAPs that reorder the values)
      if (op == "SWAP") {
        int n = in.arg;
        if (n < 2 || n > static_cast<int>(s.size())) return -1;
        std::swap(s.back(), s[s.size() - n]);
      } else {
        try {
          if (!d.exec(j, s, scratch, pure) || !scratch.empty()) return -1;
        } catch (const NotPure&) {
          return -1;
        }
      }
    } else {
      return -1;
    }
    if (!parts.empty() && std::find(group.begin(), group.end(), parts.back().first) == group.end()) return -1;
    ++j;
  }
  std::sort(parts.begin(), parts.end(), [](const auto& a, const auto& b) { return a.first->serial < b.first->serial; });
  std::string t, v;
  for (size_t k = 0; k < parts.size(); ++k) {
    if (parts[k].first->kind == ExKind::Sink || parts[k].first->kind == ExKind::Function) return -1;
    t += (k ? ", " : "") + parts[k].second;
    v += (k ? ", " : "") + wrap(parts[k].first, kPrecLambda + 1);
  }
  out.push_back(line(t + " = " + v));
  st = s;
  return j;
}

bool Decompiler::exec(int i, Stack& st, std::vector<Stmt>& out, const RegionCtx& ctx) {
  const frontend::Instruction& in = bc.at(i);
  std::string_view op = in.name;
  const int arg = in.arg;
  auto P = [&]() { return pop(st, *this, i); };
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
  if (op == "LOAD_FAST" || op == "LOAD_FAST_CHECK" || op == "LOAD_DEREF" || op == "LOAD_CLASSDEREF") { push_name(local(arg)); return true; }
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
  if (op == "KW_NAMES") {
    // remembered on the stack as a marker consumed by the next CALL
    auto e = make_marker(ExKind::Dummy, "<kwnames>");
    e->cst = &code.consts.at(arg);
    st.push_back(e);
    return true;
  }
  if (op == "CALL") {
    const ConstDesc* kwnames = nullptr;
    std::vector<ExP> args(arg);
    // KW_NAMES sits just below the arguments it names? No: it is emitted right before CALL.
    if (!st.empty() && st.back()->kind == ExKind::Dummy && st.back()->text == "<kwnames>") {
      kwnames = st.back()->cst;
      st.pop_back();
    }
    for (int k = arg - 1; k >= 0; --k) args[k] = P();
    ExP y = P(), x = P();
    if (x->kind == ExKind::WithExit || y->kind == ExKind::WithExit) {  // __exit__(None, None, None)
      st.push_back(make_marker(ExKind::Dummy, "<exit>"));
      return true;
    }
    ExP callable;
    if (x->kind == ExKind::Null) callable = y;
    else { callable = x; args.insert(args.begin(), y); }
    // class statements: __build_class__(body, 'Name', *bases, **keywords)
    if (callable->kind == ExKind::BuildClass) {
      if (args.size() < 2 || args[0]->kind != ExKind::Function || !args[1]->cst || !args[1]->cst->is_str)
        fail("__build_class__ call that is not a class statement", i);
      size_t nkw = kwnames ? kwnames->items.size() : 0;
      if (nkw + 2 > args.size()) fail("more keyword names than arguments", i);
      auto e = make_marker(ExKind::Class);
      e->fn = args[0]->fn;
      e->name = args[1]->cst->str;
      std::string header;
      for (size_t k = 2; k < args.size(); ++k) {
        if (k > 2) header += ", ";
        if (k >= args.size() - nkw) header += kwnames->items[k - (args.size() - nkw)].str + "=";
        header += wrap(args[k], kPrecLambda + 1);
      }
      e->text = header;
      st.push_back(e);
      return true;
    }
    // comprehensions (3.11 code objects; generator expressions in both versions)
    if (callable->kind == ExKind::Function && args.size() == 1 && args[0]->kind == ExKind::Iter && !kwnames) {
      const std::string& n = callable->fn->code->name;
      if (n == "<listcomp>" || n == "<setcomp>" || n == "<dictcomp>" || n == "<genexpr>") {
        st.push_back(comprehension(*callable->fn, args[0]->a, i));
        return true;
      }
    }
    // decorators
    if (args.size() == 1 && !kwnames && ((args[0]->kind == ExKind::Function && args[0]->fn->code->name != "<lambda>") ||
                                         args[0]->kind == ExKind::Class)) {
      auto f = std::make_shared<Ex>(*args[0]);
      f->fn = std::make_shared<FunctionInfo>(*args[0]->fn);
      f->fn->decorators.insert(f->fn->decorators.begin(), wrap(callable, kPrecAtom));
      st.push_back(f);
      return true;
    }
    // a call is an expression: a condition atom may call (statements are what a pure scan refuses)
    size_t nkw = kwnames ? kwnames->items.size() : 0;
    if (nkw > args.size()) fail("more keyword names than arguments", i);
    std::string s = wrap(callable, kPrecAtom) + "(";
    for (size_t k = 0; k < args.size(); ++k) {
      if (k) s += ", ";
      if (k >= args.size() - nkw) s += kwnames->items[k - (args.size() - nkw)].str + "=";
      if (args[k]->kind == ExKind::Function && args[k]->fn->code->name != "<lambda>") fail("a def used as an argument", i);
      s += wrap(args[k], kPrecLambda);
    }
    s += ")";
    if (callable->kind == ExKind::AssertError) {
      auto e = make_ex(s, kPrecAtom, ExKind::AssertError);
      e->a = args.empty() ? nullptr : args[0];
      st.push_back(e);
      return true;
    }
    st.push_back(make_ex(s));
    return true;
  }
  if (op == "CALL_FUNCTION_EX") {
    ExP kw;
    if (arg & 1) kw = P();
    ExP args = P(), fn = P();
    if (!st.empty() && st.back()->kind == ExKind::Null) st.pop_back();
    // (an expression, as CALL)
    std::vector<std::string> parts = star_args(args);
    if (kw) for (auto& k : star_kwargs(kw)) parts.push_back(k);
    std::string s = wrap(fn, kPrecAtom) + "(";
    for (size_t k = 0; k < parts.size(); ++k) s += (k ? ", " : "") + parts[k];
    st.push_back(make_ex(s + ")"));
    return true;
  }
  if (op == "FORMAT_VALUE") {
    ExP spec;
    if (arg & 4) spec = P();
    ExP v = P();
    std::string inner = wrap(v, kPrecAtom);
    if (v->kind != ExKind::Name && v->kind != ExKind::Const && inner.size() && inner[0] != '(') inner = "(" + render(v) + ")";
    if (!inner.empty() && inner[0] == '{') inner = " " + inner;
    // before 3.12 (PEP 701) a replacement field's expression may hold no backslash and no '#'
    // (its format spec may)
    if (minor < 12 && (inner.find('\\') != std::string::npos || inner.find('#') != std::string::npos))
      fail("f-string replacement field with a backslash or '#' (not expressible before 3.12)", i);
    std::string field = "{" + inner;
    int conv = arg & 3;
    if (conv == 1) field += "!s";
    if (conv == 2) field += "!r";
    if (conv == 3) field += "!a";
    if (spec) {
      field += ":";
      if (spec->kind == ExKind::Const && spec->cst && spec->cst->is_str) field += fstring_literal_piece(spec->cst->str);
      else if (spec->kind == ExKind::FString) for (auto& p : spec->fpieces) field += p.second;
      else fail("format spec that is not a string", i);
    }
    field += "}";
    auto e = make_ex("", kPrecAtom, ExKind::FString);
    e->level = minor;  // 3.12 allows backslashes and '#' in replacement fields (PEP 701)
    e->fpieces.push_back({false, field});
    st.push_back(e);
    return true;
  }
  if (op == "BUILD_STRING") {
    std::vector<ExP> parts(arg);
    for (int k = arg - 1; k >= 0; --k) parts[k] = P();
    auto e = make_ex("", kPrecAtom, ExKind::FString);
    e->level = minor;
    for (auto& p : parts) {
      if (p->kind == ExKind::FString) for (auto& q : p->fpieces) e->fpieces.push_back(q);
      else if (p->kind == ExKind::Const && p->cst && p->cst->is_str) e->fpieces.push_back({true, fstring_literal_piece(p->cst->str)});
      else fail("BUILD_STRING of a non-string piece", i);
    }
    st.push_back(e);
    return true;
  }
  if (op == "GET_AITER") {  // not an async for statement's (structurer.cpp): an async comprehension's iterator
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
  if (op == "MAKE_FUNCTION") {
    ExP c = P();
    if (c->kind != ExKind::CodeRef || !c->cst || !c->cst->code) fail("MAKE_FUNCTION without a code constant", i);
    auto fn = std::make_shared<FunctionInfo>();
    fn->code = c->cst->code.get();
    if (arg & 8) P();  // closure cells
    if (arg & 4) {  // annotations: a tuple of name, value pairs
      ExP an = P();
      std::vector<ExP> flat;
      if (an->kind == ExKind::Display && an->display == '(') flat = an->items;
      else if (an->cst && an->cst->kind == ConstDesc::Kind::Tuple)
        for (auto& it : an->cst->items) flat.push_back(const_ex(it));
      else fail("annotations that are not a tuple", i);
      if (flat.size() % 2) fail("annotations of odd length", i);
      for (size_t k = 0; k < flat.size(); k += 2) {
        if (!flat[k]->cst || !flat[k]->cst->is_str) fail("annotation of a non-string name", i);
        fn->annotations.push_back({flat[k]->cst->str, wrap(flat[k + 1], kPrecLambda + 1)});
      }
    }
    if (arg & 2) {
      ExP kw = P();
      if (kw->kind != ExKind::Display || kw->display != 'd') fail("keyword-only defaults that are not a dict display", i);
      for (size_t k = 0; k < kw->items.size(); ++k) {
        if (!kw->keys[k] || !kw->keys[k]->cst || !kw->keys[k]->cst->is_str) fail("keyword-only default with a non-string name", i);
        fn->kwdefaults.push_back({kw->keys[k]->cst->str, wrap(kw->items[k], kPrecLambda + 1)});
      }
    }
    if (arg & 1) {
      ExP dv = P();
      if (dv->kind == ExKind::Display) for (auto& it : dv->items) fn->defaults.push_back(wrap(it, kPrecLambda + 1));
      else if (dv->cst && dv->cst->kind == ConstDesc::Kind::Tuple) for (auto& it : dv->cst->items) fn->defaults.push_back(wrap(const_ex(it), kPrecLambda + 1));
      else fail("defaults that are not a tuple", i);
    }
    auto e = make_ex("", kPrecLambda, ExKind::Function);
    e->fn = fn;
    if (fn->code->name == "<lambda>") e->text = lambda_source(*fn);
    st.push_back(e);
    return true;
  }
  if (op == "YIELD_VALUE") {
    impure();
    st.push_back(yield_ex(P()));
    return true;
  }
  if (op == "IMPORT_NAME") {
    ExP fromlist = P(), level = P();
    auto e = make_marker(ExKind::Module);
    e->name = name(arg);
    e->fromlist = fromlist;
    e->level = level->cst ? std::atoi(level->cst->source.c_str()) : 0;
    st.push_back(e);
    return true;
  }
  if (op == "IMPORT_FROM") {
    ExP m = st.empty() ? nullptr : st.back();
    // `import a.b.c as x`: IMPORT_NAME a.b.c (no from-list) walks down with IMPORT_FROM b; SWAP 2;
    // POP_TOP; IMPORT_FROM c: the walk so far replaces the module (its path in `name`)
    const bool walk = m && m->kind == ExKind::ImportAttr && m->a && m->a->kind == ExKind::Module && m->a->fromlist &&
                      m->a->fromlist->cst && m->a->fromlist->cst->is_none && !m->name.empty() && m->name[0] == '.';
    if (!m || (m->kind != ExKind::Module && !walk)) fail("IMPORT_FROM without a module", i);
    auto e = make_marker(ExKind::ImportAttr);
    e->a = walk ? m->a : m;
    e->name = walk ? m->name.substr(1) + "." + name(arg) : name(arg);
    const bool no_fromlist = e->a->fromlist && e->a->fromlist->cst && e->a->fromlist->cst->is_none && e->a->level == 0;
    if (no_fromlist && i + 2 < bc.size() && !std::strcmp(bc.at(i + 1).name, "SWAP") && bc.at(i + 1).arg == 2 &&
        !std::strcmp(bc.at(i + 2).name, "POP_TOP")) {
      e->name = "." + e->name;  // a step of the walk (the leading dot marks it unfinished)
      st.back() = e;
      swap_skip_to = i + 3;
      return true;
    }
    st.push_back(e);
    return true;
  }

  // ---- statements ----
  if (op == "STORE_FAST" || op == "STORE_DEREF" || op == "STORE_GLOBAL" || op == "STORE_NAME") {
    // an assignment expression `(x := v)`: the value stays on the stack (COPY 1 before the store)
    // for an expression, not for another store or a discarding POP_TOP
    if (st.size() >= 2 && i + 1 < bc.size() && !std::strstr(bc.at(i + 1).name, "STORE_") &&
        std::strcmp(bc.at(i + 1).name, "POP_TOP") && !is_marker(st.back()) && st.back()->kind != ExKind::Function &&
        st.back()->kind != ExKind::Class && st.back()->kind != ExKind::ImportAttr && st.back()->kind != ExKind::Inplace) {
      ExP v = st.back();
      int copies = 0;
      for (size_t k = 0; k + 1 < st.size(); ++k) copies += st[k] == v;
      if (copies == 1) {
        std::string n = op == "STORE_FAST" || op == "STORE_DEREF" ? local(arg) : name(arg);
        if (op == "STORE_GLOBAL") globals_declared.insert(n);
        if (op == "STORE_DEREF" && std::find(code.freevars.begin(), code.freevars.end(), n) != code.freevars.end())
          nonlocals_declared.insert(n);
        st.pop_back();
        auto w = make_ex("(" + n + " := " + wrap(v, kPrecLambda + 1) + ")");
        for (auto& e : st)
          if (e == v) e = w;
        return true;
      }
    }
    impure();
    if (st.size() >= 2 && i + 1 < bc.size() && std::strstr(bc.at(i + 1).name, "STORE_")) {
      int j = swap_assignment(*this, i, st, out);
      if (j >= 0) {
        swap_skip_to = j;
        return true;
      }
    }
    {
      int j = tuple_store(*this, i, st, out, ctx);
      if (j >= 0) {
        swap_skip_to = j;
        return true;
      }
    }
    std::string n = op == "STORE_FAST" || op == "STORE_DEREF" ? local(arg) : name(arg);
    if (op == "STORE_NAME" && n == "__classcell__" && !class_name.empty()) {  // the class body's __class__ cell
      if (st.empty() || st.back()->kind != ExKind::Dummy || st.back()->text != "__class__") fail("__classcell__ store", i);
      st.pop_back();
      return true;
    }
    if (op == "STORE_GLOBAL") globals_declared.insert(n);
    if (op == "STORE_DEREF" && std::find(code.freevars.begin(), code.freevars.end(), n) != code.freevars.end())
      nonlocals_declared.insert(n);
    ExP v = P();
    store(*this, i, n, true, st, v, out, ctx.base);
    return true;
  }
  if (op == "STORE_ATTR" || op == "STORE_SUBSCR") {
    impure();
    int j = tuple_store(*this, i, st, out, ctx);
    if (j >= 0) {
      swap_skip_to = j;
      return true;
    }
  }
  if (op == "STORE_ATTR") {
    impure();
    ExP obj = P(), v = P();
    store(*this, i, attr_base(obj) + "." + name(arg), false, st, v, out, ctx.base);
    return true;
  }
  if (op == "STORE_SUBSCR") {
    impure();
    ExP idx = P(), obj = P(), v = P();
    // an annotated name of a class (or module) body: `x: T` (after `x = v`: `x: T = v`)
    if (obj->kind == ExKind::Name && obj->text == "__annotations__" && !class_name.empty() && idx->cst &&
        idx->cst->is_str && is_identifier(idx->cst->str)) {
      const std::string& n = idx->cst->str;
      std::string ann = wrap(v, kPrecLambda + 1);
      if (!out.empty() && out.back().kind == Stmt::Kind::Line && out.back().text.compare(0, n.size() + 3, n + " = ") == 0 &&
          out.back().text.find('\n') == std::string::npos && out.back().text.find(" = ", n.size() + 3) == std::string::npos)
        out.back().text = n + ": " + ann + " = " + out.back().text.substr(n.size() + 3);
      else
        out.push_back(line(n + ": " + ann));
      return true;
    }
    store(*this, i, attr_base(obj) + "[" + subscript_text(idx) + "]", false, st, v, out, ctx.base);
    return true;
  }
  if (op == "STORE_SLICE") {
    impure();
    ExP stop = P(), start = P(), obj = P(), v = P();
    auto s = make_ex("", kPrecAtom, ExKind::Slice);
    s->items = {start, stop};
    store(*this, i, attr_base(obj) + "[" + subscript_text(s) + "]", false, st, v, out, ctx.base);
    return true;
  }
  if (op == "DELETE_FAST" || op == "DELETE_DEREF" || op == "DELETE_GLOBAL" || op == "DELETE_NAME") {
    impure();
    std::string n = op == "DELETE_FAST" || op == "DELETE_DEREF" ? local(arg) : name(arg);
    if (op == "DELETE_GLOBAL") globals_declared.insert(n);
    if (op == "DELETE_DEREF" && std::find(code.freevars.begin(), code.freevars.end(), n) != code.freevars.end())
      nonlocals_declared.insert(n);
    out.push_back(line("del " + n));
    return true;
  }
  if (op == "DELETE_ATTR") {
    impure();
    ExP obj = P();
    out.push_back(line("del " + attr_base(obj) + "." + name(arg)));
    return true;
  }
  if (op == "DELETE_SUBSCR") {
    impure();
    ExP idx = P(), obj = P();
    out.push_back(line("del " + attr_base(obj) + "[" + subscript_text(idx) + "]"));
    return true;
  }
  if (op == "UNPACK_SEQUENCE" || op == "UNPACK_EX") {
    impure();
    ExP v = P();
    auto s = std::make_shared<SinkState>();
    s->kind = SinkState::Kind::Unpack;
    int n = op == "UNPACK_SEQUENCE" ? arg : (arg & 0xff) + 1 + (arg >> 8);
    if (op == "UNPACK_EX") s->star = arg & 0xff;
    s->targets.assign(n, "");
    if (v->kind == ExKind::Sink) {  // nested target
      s->parent = v->sink;
      s->parent_index = v->sink_index;
    } else {
      s->value = v;
    }
    for (int k = n - 1; k >= 0; --k) {
      auto slot = make_marker(ExKind::Sink);
      slot->sink = s;
      slot->sink_index = k;
      st.push_back(slot);
    }
    return true;
  }
  return false;
}

std::string SinkState::result() const {
  if (kind == Kind::Target) return targets[0];
  std::string s;
  for (size_t k = 0; k < targets.size(); ++k) {
    if (k) s += ", ";
    if (static_cast<int>(k) == star) s += "*";
    s += targets[k];
  }
  if (targets.size() == 1 && star < 0) s += ",";
  return s;
}

}  // namespace kiln::decompiler
