// Expression helpers: precedence-aware wrapping, rendering of displays, slices, f-strings and
// constants, negation and comparison chains.
#include "frontend/decompiler/expr.h"

#include <cstdio>

namespace kiln::decompiler {

ExP make_ex(std::string text, int prec, ExKind kind) {
  static unsigned long counter = 0;
  auto e = std::make_shared<Ex>();
  e->serial = ++counter;
  e->text = std::move(text);
  e->prec = prec;
  e->kind = kind;
  return e;
}

ExP make_marker(ExKind kind, std::string text) { return make_ex(std::move(text), kPrecAtom, kind); }

static std::string escape(const std::string& s, bool fstring) {
  std::string out;
  for (unsigned char c : s) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\'': out += "\\'"; break;
      case '"': out += fstring ? "\\\"" : "\""; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '{': out += fstring ? "{{" : "{"; break;
      case '}': out += fstring ? "}}" : "}"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out;
}

std::string str_literal(const std::string& s) { return "'" + escape(s, false) + "'"; }
std::string fstring_literal_piece(const std::string& s) { return escape(s, true); }

bool is_identifier(const std::string& s) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = s[i];
    bool ok = c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80 || (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  static const char* kw[] = {"False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
                             "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
                             "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
                             "with", "yield"};
  for (const char* k : kw)
    if (s == k) return false;
  return true;
}

std::string wrap(const ExP& e, int min_prec) {
  std::string t = render(e);
  if (e->prec < min_prec) return "(" + t + ")";
  return t;
}

static std::string slice_part(const ExP& p) {
  if (!p) return "";
  if (p->kind == ExKind::Const && p->cst && p->cst->is_none) return "";
  return wrap(p, kPrecLambda + 1);
}

std::string render_fstring(const Ex& e) {
  bool percent = e.name == kPercentForm;
  for (size_t k = 0; percent && e.level >= 12 && k < e.ops.size(); ++k) percent = !e.ops[k].empty();
  if (percent) {
    // `'%r x: %s' % (a, b)`: CPython compiles a %-format of a constant string whose fields are %s,
    // %r or %a and a tuple display of the values to FORMAT_VALUE and BUILD_STRING, as this f-string
    std::string fmt, args;
    int n = 0;
    for (size_t k = 0; k < e.operands.size(); ++k) {
      const std::string& c = e.ops[k];
      if (c == "%") {
        for (char ch : e.operands[k]->cst->str) fmt += ch == '%' ? std::string("%%") : std::string(1, ch);
      } else if (c.empty()) {
        throw DecompileError("f-string replacement field with a backslash or '#' (not expressible before 3.12)", -1);
      } else {
        fmt += "%" + c;
        args += (n++ ? ", " : "") + wrap(e.operands[k], kPrecLambda + 1);
      }
    }
    return str_literal(fmt) + " % (" + args + (n == 1 ? ",)" : ")");
  }
  static const char* quotes[] = {"'", "\"", "'''", "\"\"\""};
  for (const char* q : quotes) {
    bool ok = true;
    for (const auto& [lit, t] : e.fpieces) {
      if (lit) continue;
      if (t.find(q) != std::string::npos) ok = false;
    }
    if (!ok) continue;
    std::string out = std::string("f") + q;
    for (const auto& p : e.fpieces) out += p.second;
    // a literal piece ending in a quote character would close a triple quote early: escaped already.
    return out + q;
  }
  throw DecompileError("f-string whose replacement fields use every quote style", -1);
}

std::string render(const ExP& e) {
  switch (e->kind) {
    case ExKind::Display: {
      std::string body;
      if (e->display == 'd') {
        for (size_t i = 0; i < e->items.size(); ++i) {
          if (i) body += ", ";
          if (!e->keys[i]) body += "**" + wrap(e->items[i], kPrecBitOr);
          else body += wrap(e->keys[i], kPrecLambda + 1) + ": " + wrap(e->items[i], kPrecLambda + 1);
        }
        return "{" + body + "}";
      }
      for (size_t i = 0; i < e->items.size(); ++i) {
        if (i) body += ", ";
        body += e->items[i]->kind == ExKind::Starred ? render(e->items[i]) : wrap(e->items[i], kPrecLambda + 1);
      }
      if (e->display == '(') return e->items.size() == 1 && e->items[0]->kind != ExKind::Starred ? "(" + body + ",)" : "(" + body + ")";
      if (e->display == '[') return "[" + body + "]";
      if (e->items.empty()) return "set()";
      return "{" + body + "}";
    }
    case ExKind::Starred: return "*" + wrap(e->a, kPrecBitOr);
    case ExKind::Slice: {
      std::string s = "slice(" + (e->items[0] ? wrap(e->items[0], kPrecLambda + 1) : std::string("None")) + ", " +
                      (e->items[1] ? wrap(e->items[1], kPrecLambda + 1) : std::string("None"));
      if (e->items.size() > 2) s += ", " + (e->items[2] ? wrap(e->items[2], kPrecLambda + 1) : std::string("None"));
      return s + ")";
    }
    case ExKind::FString: return render_fstring(*e);
    case ExKind::Null: case ExKind::Iter: case ExKind::Sink: case ExKind::Function: case ExKind::CodeRef:
    case ExKind::Module: case ExKind::ImportAttr: case ExKind::Inplace: case ExKind::Saved: case ExKind::WithExit:
    case ExKind::Dummy: case ExKind::Accumulator: case ExKind::Chain: case ExKind::BuildClass: case ExKind::Class:
      if (e->kind == ExKind::Function && !e->text.empty()) return e->text;  // a lambda
      if (e->kind == ExKind::Accumulator && !e->text.empty()) return e->text;
      throw DecompileError("a value with no source form is used as an expression", -1);
    default: return e->text;
  }
}

// Subscript text for x[...] (slices and tuples of slices keep their `a:b` form).
std::string subscript_text(const ExP& idx) {
  if (idx->kind == ExKind::Slice) {
    std::string s = slice_part(idx->items[0]) + ":" + slice_part(idx->items[1]);
    if (idx->items.size() > 2 && idx->items[2]) s += ":" + slice_part(idx->items[2]);
    return s;
  }
  if (idx->kind == ExKind::Display && idx->display == '(' && !idx->items.empty()) {
    bool has_slice = false, has_star = false;
    for (auto& it : idx->items) has_slice |= it->kind == ExKind::Slice, has_star |= it->kind == ExKind::Starred;
    if (has_slice && !has_star) {
      std::string s;
      for (size_t i = 0; i < idx->items.size(); ++i) s += (i ? ", " : "") + subscript_text(idx->items[i]);
      return idx->items.size() == 1 ? s + "," : s;
    }
  }
  if (idx->kind == ExKind::Const && idx->cst && idx->cst->kind == ConstDesc::Kind::Tuple && !idx->cst->items.empty()) {
    // x[1, 2]: a constant tuple index prints without its parentheses
    return idx->text;
  }
  return wrap(idx, kPrecLambda + 1);
}

ExP const_ex(const ConstDesc& c) {
  int prec = kPrecAtom;
  if (!c.source.empty() && c.source[0] == '-') prec = kPrecUnary;
  if (c.kind == ConstDesc::Kind::FrozenSet) prec = kPrecAtom;
  auto e = make_ex(c.source, prec, c.kind == ConstDesc::Kind::Code ? ExKind::CodeRef : ExKind::Const);
  e->cst = &c;
  return e;
}

ExP negate(const ExP& e) {
  if (e->kind == ExKind::Not) return e->a;
  if (e->kind == ExKind::Compare && e->ops.size() == 1) {
    const std::string& op = e->ops[0];
    std::string flipped = op == "is" ? "is not" : op == "is not" ? "is" : op == "in" ? "not in" : op == "not in" ? "in" : "";
    if (!flipped.empty()) {
      auto r = compare_ex(e->operands[0], flipped, e->operands[1]);
      r->b = e;  // remembers what it negates
      return r;
    }
  }
  auto n = make_ex("not " + wrap(e, kPrecNot), kPrecNot, ExKind::Not);
  n->a = e;
  return n;
}

std::string binary_op_text(int arg) {
  static const char* ops[] = {"+", "&", "//", "<<", "@", "*", "%", "|", "**", ">>", "-", "/", "^"};
  if (arg >= 0 && arg < 13) return ops[arg];
  if (arg >= 13 && arg < 26) return std::string(ops[arg - 13]) + "=";
  return "";
}

ExP compare_ex(const ExP& left, const std::string& op, const ExP& right) {
  auto e = make_ex("", kPrecCompare, ExKind::Compare);
  e->operands = {left, right};
  e->ops = {op};
  e->text = wrap(left, kPrecCompare + 1) + " " + op + " " + wrap(right, kPrecCompare + 1);
  return e;
}

}  // namespace kiln::decompiler
