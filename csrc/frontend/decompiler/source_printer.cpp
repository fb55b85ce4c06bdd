// Printing of the statement tree as Python source: four-space indentation, `pass` for empty
// bodies, `else: if ...` chains folded into `elif`.
#include "frontend/decompiler/stmt.h"

namespace kiln::decompiler {

Stmt line(std::string text) {
  Stmt s;
  s.text = std::move(text);
  return s;
}

bool ends_flow(const std::vector<Stmt>& body) {
  if (body.empty()) return false;
  const Stmt& s = body.back();
  switch (s.kind) {
    case Stmt::Kind::Break: case Stmt::Kind::Continue: case Stmt::Kind::Return: case Stmt::Kind::Raise: return true;
    case Stmt::Kind::If: {
      if (!ends_flow(s.body)) return false;
      bool has_else = false;
      for (const auto& c : s.clauses) {
        if (!ends_flow(c.body)) return false;
        has_else |= c.header == "else";
      }
      return has_else;
    }
    default: return false;
  }
}

static void print_into(const std::vector<Stmt>& body, int indent, std::string& out) {
  std::string pad(indent * 4, ' ');
  if (body.empty()) {
    out += pad + "pass\n";
    return;
  }
  for (const Stmt& s : body) {
    if (s.kind == Stmt::Kind::Line || s.kind == Stmt::Kind::Break || s.kind == Stmt::Kind::Continue ||
        s.kind == Stmt::Kind::Return || s.kind == Stmt::Kind::Raise || s.kind == Stmt::Kind::Append) {
      // multi-line texts (nested defs) are pre-indented relative to column 0
      size_t start = 0;
      while (start <= s.text.size()) {
        size_t nl = s.text.find('\n', start);
        std::string ln = s.text.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
        if (!ln.empty()) out += pad + ln + "\n";
        if (nl == std::string::npos) break;
        start = nl + 1;
      }
      continue;
    }
    out += pad + s.text + ":\n";
    print_into(s.body, indent + 1, out);
    // fold `else:` holding only an if-statement into elif
    std::vector<Stmt::Clause> clauses = s.clauses;
    for (size_t i = 0; i < clauses.size(); ++i) {
      auto& c = clauses[i];
      if (s.kind == Stmt::Kind::If && c.header == "else" && c.body.size() == 1 && c.body[0].kind == Stmt::Kind::If) {
        const Stmt& inner = c.body[0];
        out += pad + "el" + inner.text + ":\n";
        print_into(inner.body, indent + 1, out);
        std::vector<Stmt::Clause> rest(inner.clauses.begin(), inner.clauses.end());
        clauses.insert(clauses.begin() + i + 1, rest.begin(), rest.end());
        continue;
      }
      out += pad + c.header + ":\n";
      print_into(c.body, indent + 1, out);
    }
  }
}

std::string print_block(const std::vector<Stmt>& body, int indent) {
  std::string out;
  print_into(body, indent, out);
  return out;
}

}  // namespace kiln::decompiler
