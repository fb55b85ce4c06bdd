// Stack effects of simple statements: stores (plain, chained, augmented, walrus, tuple and
// swap assignments, for/except/with targets through sinks, def/class/import bindings),
// deletes and unpacking. Reached from Decompiler::exec (stack_effects.cpp).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "frontend/decompiler/stack/stack_helpers.h"

namespace kiln::decompiler {

namespace {

bool is_trivial(const ExP& e) { return e->kind == ExKind::Name || e->kind == ExKind::Const; }

}  // namespace

using stackfx::attr_base;
using stackfx::display;
using stackfx::swap_assignment;

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
      const ExP& v = cur->value;
      // a chained assignment whose earlier target was a name (`s = a, b = v`)
      if (v->chain_out == &out && v->chain_index + 1 == out.size() && out.back().kind == Stmt::Kind::Line) {
        v->chain_lhs += " = " + cur->result();
        out.back().text = v->chain_lhs + " = " + v->chain_rhs;
        return;
      }
      const std::string rhs = wrap(v, kPrecTuple);
      out.push_back(line(cur->result() + " = " + rhs));
      // `a, b = s = v` (COPY 1 before the unpack): the copy left on the stack is v itself, which
      // the next target takes; a marker stands for it, so v is not evaluated twice
      bool dup = false;
      for (auto& e : st) dup |= e == v;
      if (dup) {
        auto n = make_marker(ExKind::Chain, "<chain>");
        n->chain_out = &out;
        n->chain_index = out.size() - 1;
        n->chain_lhs = cur->result();
        n->chain_rhs = rhs;
        for (auto& e : st)
          if (e == v) e = n;
      }
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
int stackfx::swap_assignment(Decompiler& d, int i, Stack& st, std::vector<Stmt>& out) {
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

bool Decompiler::exec_store(int i, std::string_view op, int arg, Stack& st, std::vector<Stmt>& out, const RegionCtx& ctx) {
  auto P = [&]() { return stackfx::pop(st, *this, i); };
  auto impure = [&]() {
    if (ctx.pure) throw NotPure{};
  };

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
    // 3.12: a class body holding annotation scopes (generic methods, PEP 695) keeps its namespace
    // in a cell for them: `__classdict__ = <locals>` first, `__classdictcell__ = <cell>` last
    if (!class_name.empty() && !st.empty() && st.back()->kind == ExKind::Dummy &&
        ((op == "STORE_DEREF" && n == "__classdict__" && st.back()->text == "<locals>") ||
         (op == "STORE_NAME" && n == "__classdictcell__" && st.back()->text == "__classdict__"))) {
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
