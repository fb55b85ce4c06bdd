// Functions: the `def` header (parameters, defaults, decorators, global/nonlocal declarations)
// around a decompiled body, lambdas, and comprehensions rebuilt from the loop that fills them
// (3.11's nested <listcomp>/<setcomp>/<dictcomp>/<genexpr> code objects, 3.12's inlined ones).
#include <cstring>
#include <functional>
#include <optional>

#include "frontend/decompiler/decompiler_state.h"

namespace kiln::decompiler {

namespace {

// The parameter list of a function: names, defaults (rendered), annotations (name -> source;
// "return" is the return annotation, not a parameter).
std::string parameters(const CodeDesc& c, const FunctionInfo& fn) {
  auto ann = [&](const std::string& n) {
    for (auto& [an, av] : fn.annotations)
      if (an == n) return ": " + av;
    return std::string();
  };
  std::vector<std::string> parts;
  int npos = c.argcount;
  int first_default = npos - static_cast<int>(fn.defaults.size());
  for (int k = 0; k < npos; ++k) {
    std::string p = c.varnames.at(k) + ann(c.varnames.at(k));
    if (k >= first_default) p += (p.find(':') != std::string::npos ? " = " : "=") + fn.defaults[k - first_default];
    parts.push_back(p);
    if (c.posonlyargcount > 0 && k == c.posonlyargcount - 1) parts.push_back("/");
  }
  int idx = npos + c.kwonlyargcount;
  if (c.flags & kCoVarargs) parts.push_back("*" + c.varnames.at(idx) + ann(c.varnames.at(idx)));
  else if (c.kwonlyargcount) parts.push_back("*");
  for (int k = 0; k < c.kwonlyargcount; ++k) {
    std::string n = c.varnames.at(npos + k), p = n + ann(n);
    for (auto& [kn, kv] : fn.kwdefaults)
      if (kn == n) p += (p.size() > n.size() ? " = " : "=") + kv;
    parts.push_back(p);
  }
  if (c.flags & kCoVarkeywords) {
    const std::string& n = c.varnames.at(idx + ((c.flags & kCoVarargs) ? 1 : 0));
    parts.push_back("**" + n + ann(n));
  }
  std::string s;
  for (size_t k = 0; k < parts.size(); ++k) s += (k ? ", " : "") + parts[k];
  return s;
}

std::string declarations(const Decompiler& d, const std::string& pad);

// Strips the implicit trailing `return None`, also at the end of the branches of a final if
// statement (the compiler copies the function's end into them).
bool is_return_none(const Stmt& s) {
  return s.kind == Stmt::Kind::Return && s.e1 && s.e1->cst && s.e1->cst->is_none && s.text == "return None";
}

void drop_final_return(std::vector<Stmt>& body) {
  if (!body.empty() && is_return_none(body.back())) body.pop_back();
  if (!body.empty() && body.back().kind == Stmt::Kind::If) {
    drop_final_return(body.back().body);
    for (auto& c : body.back().clauses) drop_final_return(c.body);
  }
}

// A class body (where no return statement can be written) whose if branch ends in a copy of the
// body's implicit `return None` with more statements after the if: 3.11 lays `if c: A else: B` at
// the end of a class body out as A's copy of the end, then B; the statements after the if are its
// else clause, so every return is a final one.
void fold_branch_returns(std::vector<Stmt>& body) {
  for (size_t k = 0; k + 1 < body.size(); ++k) {
    Stmt& s = body[k];
    if (s.kind != Stmt::Kind::If || !s.clauses.empty() || s.body.empty() || !is_return_none(s.body.back())) continue;
    Stmt::Clause c{"else", {}};
    c.body.assign(body.begin() + static_cast<long>(k) + 1, body.end());
    body.erase(body.begin() + static_cast<long>(k) + 1, body.end());
    fold_branch_returns(c.body);
    s.clauses.push_back(std::move(c));
    return;
  }
}

bool has_return(const std::vector<Stmt>& body) {
  for (auto& s : body) {
    if (s.kind == Stmt::Kind::Return || has_return(s.body)) return true;
    for (auto& c : s.clauses)
      if (has_return(c.body)) return true;
  }
  return false;
}

std::string def_source(const FunctionInfo& fn, const std::string& name) {
  const CodeDesc& c = *fn.code;
  Decompiler d(c);
  std::vector<Stmt> body = d.body();
  drop_final_return(body);
  std::string head;
  for (auto& dec : fn.decorators) head += "@" + dec + "\n";
  std::string ret;
  for (auto& [an, av] : fn.annotations)
    if (an == "return") ret = " -> " + av;
  head += std::string(c.flags & (kCoCoroutine | kCoAsyncGenerator) ? "async " : "") + "def " + name +
          (fn.type_params.empty() ? "" : "[" + fn.type_params + "]") + "(" + parameters(c, fn) + ")" + ret + ":\n";
  // a def's docstring is its first constant (3.11/3.12 put None there when it has none); it has
  // no instruction of its own, so it is printed from the constant, ahead of everything else
  std::string doc;
  if (!c.consts.empty() && c.consts[0].kind == ConstDesc::Kind::Value && c.consts[0].is_str) doc = "    " + c.consts[0].source + "\n";
  std::string decl = doc + declarations(d, "    ");
  std::string text = print_block(body, 1);
  // a generator whose body never yields (after dead-code removal) must stay a generator
  if ((c.flags & kCoGenerator) && text.find("yield") == std::string::npos) text += "    if False:\n        yield\n";
  return head + decl + text;
}

std::string declarations(const Decompiler& d, const std::string& pad) {
  std::string decl;
  for (auto* set : {&d.globals_declared, &d.nonlocals_declared}) {
    if (set->empty()) continue;
    decl += pad + (set == &d.globals_declared ? "global " : "nonlocal ");
    bool first = true;
    for (auto& g : *set) decl += (first ? "" : ", ") + g, first = false;
    decl += "\n";
  }
  return decl;
}

bool is_line(const Stmt& s, const std::string& prefix) {
  return s.kind == Stmt::Kind::Line && s.text.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace

bool Decompiler::is_class_body(const CodeDesc& c) {
  if (c.flags & (kCoOptimized | kCoNewlocals)) return false;
  // LOAD_NAME __name__; STORE_NAME __module__ among the first instructions
  frontend::Bytecode b(c.code.data(), c.code.size(), 3, c.py_minor);
  for (int j = 0; j + 1 < b.size() && j < 6; ++j)
    if (!std::strcmp(b.at(j).name, "LOAD_NAME") && !std::strcmp(b.at(j + 1).name, "STORE_NAME") &&
        b.at(j).arg < static_cast<int>(c.names.size()) && c.names[b.at(j).arg] == "__name__" &&
        b.at(j + 1).arg < static_cast<int>(c.names.size()) && c.names[b.at(j + 1).arg] == "__module__")
      return true;
  return false;
}

std::string Decompiler::mangled(const std::string& n) const {
  if (class_name.empty() || n.size() < 3 || n.compare(0, 2, "__") || n.compare(n.size() - 2, 2, "__") == 0 ||
      n.find('.') != std::string::npos)
    return n;
  size_t k = class_name.find_first_not_of('_');
  if (k == std::string::npos) return n;
  return "_" + class_name.substr(k) + n;
}

std::string Decompiler::class_source(const FunctionInfo& fn, const std::string& name, const std::string& header) {
  const CodeDesc& c = *fn.code;
  if (!is_class_body(c)) fail("class whose body is not a class body", 0);
  Decompiler d(c);
  d.class_name = c.name;
  d.generic_class_ = !fn.type_params.empty();
  std::vector<Stmt> body = d.body();
  fold_branch_returns(body);
  drop_final_return(body);
  // the prologue the compiler adds: __module__ = __name__; __qualname__ = '...'
  size_t k = 0;
  if (k < body.size() && body[k].kind == Stmt::Kind::Line && body[k].text == "__module__ = __name__") ++k;
  if (k < body.size() && is_line(body[k], "__qualname__ = ")) ++k;
  else fail("class body without its __qualname__", 0);
  // a generic class's prologue: `__type_params__ = .type_params` (its header's type parameters)
  if (d.generic_class_) {
    if (k < body.size() && body[k].kind == Stmt::Kind::Line && body[k].text == "__type_params__ = .type_params") ++k;
    else fail("generic class body without its __type_params__", 0);
  }
  body.erase(body.begin(), body.begin() + k);
  if (has_return(body)) fail("class body that returns before its end", 0);
  // a docstring: `__doc__ = 'text'` (a string constant) as the first statement
  if (!body.empty() && is_line(body[0], "__doc__ = ") && body[0].e1 && body[0].e1->kind == ExKind::Const &&
      body[0].e1->cst && body[0].e1->cst->is_str)
    body[0].text = body[0].text.substr(10);
  std::string head;
  for (auto& dec : fn.decorators) head += "@" + dec + "\n";
  head += "class " + name + (fn.type_params.empty() ? "" : "[" + fn.type_params + "]") + (header.empty() ? "" : "(" + header + ")") + ":\n";
  return head + declarations(d, "    ") + print_block(body, 1);
}

std::string decompile(const CodeDesc& code, const std::vector<std::string>& defaults,
                      const std::vector<std::pair<std::string, std::string>>& kwdefaults) {
  std::string name = is_identifier(code.name) ? code.name : "_decompiled";
  if (Decompiler::is_class_body(code)) {
    Decompiler d(code);
    FunctionInfo fn;
    fn.code = &code;
    return d.class_source(fn, name, "");
  }
  FunctionInfo fn;
  fn.code = &code;
  fn.defaults = defaults;
  fn.kwdefaults = kwdefaults;
  return def_source(fn, name);
}

std::string Decompiler::function_source(const FunctionInfo& fn, const std::string& name) {
  return def_source(fn, name);
}

namespace {

// The value a lambda's body returns as one expression: `return v`, or (3.12 compiles a
// conditional expression in a lambda into branches) `if c: <returns> [else:] <returns>`.
ExP returned_value(const std::vector<Stmt>& body, size_t from = 0) {
  if (from >= body.size()) return nullptr;
  const Stmt& s = body[from];
  if (s.kind == Stmt::Kind::Return && s.e1 && from + 1 == body.size()) return s.e1;
  if (s.kind != Stmt::Kind::If || !s.e1 || s.clauses.size() > 1) return nullptr;
  ExP yes = returned_value(s.body);
  ExP no = s.clauses.empty() ? returned_value(body, from + 1)
                             : (from + 1 == body.size() && s.clauses[0].header == "else" ? returned_value(s.clauses[0].body) : nullptr);
  if (!yes || !no || yes->name == "<yield>" || no->name == "<yield>") return nullptr;
  return make_ex(wrap(yes, kPrecTernary + 1) + " if " + wrap(s.e1, kPrecTernary + 1) + " else " + wrap(no, kPrecTernary), kPrecTernary);
}

}  // namespace

std::string Decompiler::lambda_source(const FunctionInfo& fn) {
  Decompiler d(*fn.code);
  std::vector<Stmt> body = d.body();
  ExP v = returned_value(body);
  if (!v) fail("lambda whose body is not a single expression", 0);
  std::string params = parameters(*fn.code, fn);
  std::string value = v->name == "<yield>" ? "(" + v->text + ")" : wrap(v, kPrecLambda);
  return "lambda" + (params.empty() ? std::string() : " " + params) + ": " + value;
}

namespace {

struct CompParts {
  std::vector<std::string> clauses;  // "for x in y", "if c"
  std::optional<Stmt> element;  // a copy: walk() recurses into temporary slices of the body
};

void walk(const std::vector<Stmt>& body, CompParts& parts, const Decompiler& d, int at) {
  if (body.empty()) d.fail("comprehension without an element", at);
  const Stmt& s = body[0];
  if (body.size() >= 2 && s.kind == Stmt::Kind::If && s.clauses.empty() && s.body.size() == 1 &&
      s.body[0].kind == Stmt::Kind::Continue) {
    parts.clauses.push_back("if " + wrap(negate(s.e1), kPrecOr));
    std::vector<Stmt> rest(body.begin() + 1, body.end());
    walk(rest, parts, d, at);
    return;
  }
  if (body.size() == 2 && body[1].kind == Stmt::Kind::Continue) {
    std::vector<Stmt> one(body.begin(), body.begin() + 1);
    walk(one, parts, d, at);
    return;
  }
  if (body.size() != 1) d.fail("comprehension loop with more than one statement", at);
  switch (s.kind) {
    case Stmt::Kind::For:
      if (!s.clauses.empty()) d.fail("comprehension loop with an else", at);
      parts.clauses.push_back(std::string(s.text.compare(0, 10, "async for ") == 0 ? "async for " : "for ") + s.target + " in " +
                              wrap(s.e1, kPrecOr));
      walk(s.body, parts, d, at);
      return;
    case Stmt::Kind::If:
      if (!s.clauses.empty()) d.fail("comprehension condition with an else", at);
      parts.clauses.push_back("if " + wrap(s.e1, kPrecOr));
      walk(s.body, parts, d, at);
      return;
    case Stmt::Kind::Append: parts.element = s; return;
    default: d.fail("statement inside a comprehension", at);
  }
}

ExP build_comprehension(const Stmt& loop, const std::string& iterable, char kind, const Decompiler& d, int at) {
  CompParts parts;
  if (!loop.clauses.empty()) d.fail("comprehension loop with an else", at);
  const bool async = loop.text.compare(0, 10, "async for ") == 0;
  parts.clauses.push_back(std::string(async ? "async for " : "for ") + loop.target + " in " + iterable);
  walk(loop.body, parts, d, at);
  if (!parts.element) d.fail("comprehension without an element", at);
  const Stmt& el = *parts.element;
  std::string elem;
  if (kind == 'd') {
    if (!el.e2) d.fail("dict comprehension without a key", at);
    elem = wrap(el.e2, kPrecLambda + 1) + ": " + wrap(el.e1, kPrecLambda + 1);
  } else {
    elem = wrap(el.e1, kPrecLambda);
  }
  std::string body = elem;
  for (auto& c : parts.clauses) body += " " + c;
  std::string open = kind == '[' ? "[" : kind == '(' ? "(" : "{", close = kind == '[' ? "]" : kind == '(' ? ")" : "}";
  return make_ex(open + body + close);
}

const Stmt* find_loop(const std::vector<Stmt>& body) {
  for (auto& s : body)
    if (s.kind == Stmt::Kind::For) return &s;
  return nullptr;
}

}  // namespace

ExP Decompiler::inline_comprehension(const Stmt& loop, const ExP& acc, int at) {
  char kind = acc->display == 'd' ? 'd' : acc->display == '{' ? '{' : '[';
  if (acc->kind != ExKind::Display || !acc->items.empty()) fail("comprehension into a non-empty display", at);
  return build_comprehension(loop, wrap(loop.e1, kPrecOr), kind, *this, at);
}

ExP Decompiler::comprehension(const FunctionInfo& fn, const ExP& iterable, int at) {
  Decompiler d(*fn.code);
  std::vector<Stmt> body = d.body();
  const std::string& n = fn.code->name;
  std::string it = wrap(iterable, kPrecOr);
  if (n == "<genexpr>") {
    const Stmt* loop = find_loop(body);
    if (!loop) fail("generator expression without a loop", at);
    return build_comprehension(*loop, it, '(', d, at);
  }
  // 3.11: the loop became an inline comprehension returned by the code object
  if (body.size() != 1 || body[0].kind != Stmt::Kind::Return || !body[0].e1) fail("comprehension code of an unexpected shape", at);
  std::string t = render(body[0].e1);
  // the first clause iterates `.0`: substitute the real iterable
  size_t pos = t.find(" in .0");
  if (pos == std::string::npos) fail("comprehension not iterating its argument", at);
  t.replace(pos, 6, " in " + it);
  auto e = make_ex(t);
  // an async comprehension (`async for`, or `await` in it) is a coroutine the caller awaits
  if (fn.code->flags & kCoCoroutine) e->name = "<asynccomp>";
  return e;
}

}  // namespace kiln::decompiler
