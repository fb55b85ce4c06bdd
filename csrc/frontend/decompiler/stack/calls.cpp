// Stack effects of calls and what builds callables and modules: CALL (with KW_NAMES),
// CALL_FUNCTION_EX (star arguments), f-strings (FORMAT_VALUE, BUILD_STRING), MAKE_FUNCTION
// (defaults, keyword-only defaults, annotations; lambdas rendered here) and IMPORT_NAME/FROM.
// Reached from Decompiler::exec (stack_effects.cpp).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "frontend/decompiler/stack/stack_helpers.h"

namespace kiln::decompiler {

namespace {

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

}  // namespace

using stackfx::display;

bool Decompiler::exec_call(int i, std::string_view op, int arg, Stack& st) {
  auto P = [&]() { return stackfx::pop(st, *this, i); };

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
    if (callable->kind == ExKind::Function && callable->fn->generic_scope) {
      if (kwnames) fail("generic function scope called with keywords", i);
      st.push_back(generic_scope_call(*callable->fn, args, i));
      return true;
    }
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
        // (a generic class's Generic[*type params] base, which the compiler adds: generics.cpp)
        if (args[k]->kind == ExKind::Dummy && args[k]->text == "<generic base>" && k < args.size() - nkw) continue;
        if (!header.empty()) header += ", ";
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
    std::string field = "{" + inner;
    int conv = arg & 3;
    auto e = make_ex("", kPrecAtom, ExKind::FString);
    e->level = minor;  // 3.12 allows backslashes and '#' in replacement fields (PEP 701)
    // the field for the `'...%s...' % (v,)` form, which CPython compiles to these instructions
    e->operands.push_back(v);
    e->ops.push_back(spec || conv == 0 ? "" : conv == 1 ? "s" : conv == 2 ? "r" : "a");
    // before 3.12 (PEP 701) a replacement field's expression may hold no backslash and no '#'
    // (its format spec may): only that %-form spells it (for 3.12 too, where it can: source that
    // every supported version reads)
    if (inner.find('\\') != std::string::npos || inner.find('#') != std::string::npos) {
      e->name = kPercentForm;
      e->prec = kPrecTerm;
    }
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
      if (p->kind == ExKind::FString) {
        for (auto& q : p->fpieces) e->fpieces.push_back(q);
        e->operands.insert(e->operands.end(), p->operands.begin(), p->operands.end());
        e->ops.insert(e->ops.end(), p->ops.begin(), p->ops.end());
        if (p->name == kPercentForm) e->name = kPercentForm, e->prec = kPrecTerm;
      } else if (p->kind == ExKind::Const && p->cst && p->cst->is_str) {
        e->fpieces.push_back({true, fstring_literal_piece(p->cst->str)});
        e->operands.push_back(p);
        e->ops.push_back("%");  // a literal piece
      } else {
        fail("BUILD_STRING of a non-string piece", i);
      }
    }
    st.push_back(e);
    return true;
  }
  if (op == "MAKE_FUNCTION") {
    ExP c = P();
    if (c->kind != ExKind::CodeRef || !c->cst || !c->cst->code) fail("MAKE_FUNCTION without a code constant", i);
    auto fn = std::make_shared<FunctionInfo>();
    fn->code = c->cst->code.get();
    // 3.12's annotation scope of a generic function or class (`def f[T](...)`, PEP 695), called
    // at once: the call gives the function (generics.cpp)
    if (c->cst->code->name.rfind("<generic parameters of ", 0) == 0) fn->generic_scope = fn->code;
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
        const ExP& v = flat[k + 1];
        // `*args: *Ts` (3.12): the annotation is the one item unpacked from Ts (UNPACK_SEQUENCE 1)
        if (v->kind == ExKind::Sink && v->sink && v->sink->kind == SinkState::Kind::Unpack && v->sink->value &&
            v->sink->targets.size() == 1 && v->sink->star < 0)
          fn->annotations.push_back({flat[k]->cst->str, "*" + wrap(v->sink->value, kPrecOr)});
        else fn->annotations.push_back({flat[k]->cst->str, wrap(v, kPrecLambda + 1)});
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

  return false;
}

}  // namespace kiln::decompiler
