// Reading the ATen graph's textual form back (AtenGraph::parse), so passes can be tested from
// text: lowering and scheduling tests start from a graph written out in the test.
//
//   %0 = input 0 : f32[4, 16]{16, 1}
//   %1 = constant 0 : f32[16]{1}
//   %2 = aten::mul.Tensor(%0, other=%1) : f32[4, 16]{16, 1}
//   %3, %4 = aten::var_mean.correction(%2, dim=[1], correction=1, keepdim=True) : f32[4, 1]{1, 1}, f32[4, 1]{1, 1}
//   return %2, %3
//   mutates input 0 := %2
#include <cctype>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <map>
#include <stdexcept>

#include "ir/aten_graph.h"

namespace kiln::ir {

namespace {

class LineParser {
 public:
  LineParser(const std::string& line, int number) : s_(line), line_(number) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("aten graph text, line " + std::to_string(line_) + ": " + what + " at '" + s_.substr(std::min(p_, s_.size())) + "'");
  }
  void skip() { while (p_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[p_]))) ++p_; }
  bool peek(const std::string& t) { skip(); return s_.compare(p_, t.size(), t) == 0; }
  bool accept(const std::string& t) {
    if (!peek(t)) return false;
    p_ += t.size();
    return true;
  }
  void expect(const std::string& t) { if (!accept(t)) fail("expected '" + t + "'"); }
  bool done() { skip(); return p_ >= s_.size(); }

  std::string word() {  // identifiers, operator names, numbers
    skip();
    size_t b = p_;
    while (p_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[p_])) || std::strchr("_:.-+", s_[p_]))) ++p_;
    if (b == p_) fail("expected a name or number");
    return s_.substr(b, p_ - b);
  }
  int64_t integer() {
    std::string w = word();
    char* end;
    long long v = std::strtoll(w.c_str(), &end, 10);
    if (*end) fail("expected an integer");
    return v;
  }
  int value_ref() {
    expect("%");
    return static_cast<int>(integer());
  }

  TensorMeta meta() {
    TensorMeta m;
    skip();
    size_t b = p_;
    while (p_ < s_.size() && std::isalnum(static_cast<unsigned char>(s_[p_]))) ++p_;
    m.dtype = dtype_of(s_.substr(b, p_ - b));
    m.sizes = int_list("[", "]");
    m.strides = int_list("{", "}");
    if (accept("+")) m.storage_offset = integer();
    if (accept("@device")) m.cpu = false;
    return m;
  }

  AtenArg arg() {
    AtenArg a;
    skip();
    // name=
    if (p_ < s_.size() && (std::isalpha(static_cast<unsigned char>(s_[p_])) || s_[p_] == '_')) {
      size_t q = p_;
      while (q < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[q])) || s_[q] == '_')) ++q;
      if (q < s_.size() && s_[q] == '=') {
        a.name = s_.substr(p_, q - p_);
        p_ = q + 1;
      }
    }
    if (accept("%")) { a.kind = AtenArg::kTensor; a.value = static_cast<int>(integer()); return a; }
    if (accept("None")) { a.kind = AtenArg::kNone; return a; }
    if (accept("True")) { a.kind = AtenArg::kBool; a.i = 1; return a; }
    if (accept("False")) { a.kind = AtenArg::kBool; a.i = 0; return a; }
    if (accept("'")) {
      size_t e = s_.find('\'', p_);
      if (e == std::string::npos) fail("unterminated string");
      a.kind = AtenArg::kString;
      a.s = s_.substr(p_, e - p_);
      p_ = e + 1;
      return a;
    }
    if (accept("[")) {
      a.kind = AtenArg::kIntList;
      while (!accept("]")) {
        if (!a.ints.empty() || !a.doubles.empty() || !a.values.empty()) expect(",");
        if (accept("%")) { a.kind = AtenArg::kTensorList; a.values.push_back(static_cast<int>(integer())); continue; }
        if (accept("None")) { a.kind = AtenArg::kTensorList; a.values.push_back(-1); continue; }
        std::string w = word();
        if (is_double(w)) a.kind = AtenArg::kDoubleList;
        a.doubles.push_back(std::strtod(w.c_str(), nullptr));
        a.ints.push_back(std::strtoll(w.c_str(), nullptr, 10));
      }
      if (a.kind != AtenArg::kDoubleList) a.doubles.clear();
      else a.ints.clear();
      return a;
    }
    std::string w = word();
    if (dtype_of(w, false) != DType::kUnknown) { a.kind = AtenArg::kDType; a.i = static_cast<int64_t>(dtype_of(w)); return a; }
    if (is_double(w)) { a.kind = AtenArg::kDouble; a.d = std::strtod(w.c_str(), nullptr); return a; }
    char* end;
    a.i = std::strtoll(w.c_str(), &end, 10);
    if (*end) { a.kind = AtenArg::kOther; a.s = w; return a; }
    a.kind = AtenArg::kInt;
    return a;
  }

 private:
  static bool is_double(const std::string& w) {
    return w.find_first_of(".eEn") != std::string::npos && w.find("0x") == std::string::npos;
  }
  DType dtype_of(const std::string& name, bool required = true) const {
    static const std::map<std::string, DType> kNames = {
        {"u8", DType::kUInt8}, {"i8", DType::kInt8}, {"i16", DType::kInt16}, {"i32", DType::kInt32},
        {"i64", DType::kInt64}, {"f16", DType::kFloat16}, {"f32", DType::kFloat32}, {"f64", DType::kFloat64},
        {"b8", DType::kBool}, {"bf16", DType::kBFloat16}};
    auto it = kNames.find(name);
    if (it != kNames.end()) return it->second;
    if (required) fail("unknown dtype '" + name + "'");
    return DType::kUnknown;
  }
  std::vector<int64_t> int_list(const char* open, const char* close) {
    std::vector<int64_t> v;
    expect(open);
    while (!accept(close)) {
      if (!v.empty()) expect(",");
      v.push_back(integer());
    }
    return v;
  }

  const std::string& s_;
  size_t p_ = 0;
  int line_;
};

}  // namespace

AtenGraph AtenGraph::parse(const std::string& text) {
  AtenGraph g;
  std::vector<bool> defined;  // value ids keep their numbers from the text
  auto id_of = [&](int id, LineParser& lp) {
    if (id < 0 || id >= static_cast<int>(defined.size()) || !defined[id]) lp.fail(std::to_string(id).insert(0, 1, '%') + " is not defined");
    return id;
  };
  auto define = [&](int id, AtenValue::Kind kind, int index, TensorMeta meta, LineParser& lp) {
    if (id < 0 || id > 1000000) lp.fail("bad value id");
    if (id >= static_cast<int>(defined.size())) defined.resize(id + 1, false), g.values.resize(id + 1);
    if (defined[id]) lp.fail("%" + std::to_string(id) + " is defined twice");
    defined[id] = true;
    g.values[id].kind = kind;
    g.values[id].index = index;
    g.values[id].meta = std::move(meta);
  };
  size_t start = 0;
  int number = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    ++number;
    LineParser lp(line, number);
    if (lp.done()) continue;
    if (lp.accept("return")) {
      while (!lp.done()) {
        if (!g.outputs.empty()) lp.expect(",");
        g.outputs.push_back(id_of(lp.value_ref(), lp));
      }
      continue;
    }
    if (lp.accept("mutates input")) {
      int input = static_cast<int>(lp.integer());
      lp.expect(":=");
      g.input_mutations.push_back({input, id_of(lp.value_ref(), lp)});
      continue;
    }
    std::vector<int> outs;  // text ids, -1 for "_"
    do {
      if (lp.accept("_")) outs.push_back(-1);
      else outs.push_back(lp.value_ref());
    } while (lp.accept(","));
    lp.expect("=");
    if (lp.peek("input") || lp.peek("constant")) {
      bool input = lp.accept("input");
      if (!input) lp.expect("constant");
      int index = static_cast<int>(lp.integer());
      lp.expect(":");
      define(outs.at(0), input ? AtenValue::kInput : AtenValue::kConstant, index, lp.meta(), lp);
      if (!lp.done()) lp.fail("unexpected text");
      if (input) g.num_inputs = std::max(g.num_inputs, index + 1);
      continue;
    }
    AtenNode n;
    n.op = lp.word();
    lp.expect("(");
    while (!lp.accept(")")) {
      if (!n.args.empty()) lp.expect(",");
      AtenArg a = lp.arg();
      if (a.kind == AtenArg::kTensor) a.value = id_of(a.value, lp);
      for (int& v : a.values)
        if (v >= 0) v = id_of(v, lp);
      n.args.push_back(std::move(a));
    }
    const int node = static_cast<int>(g.nodes.size());
    lp.expect(":");
    bool first = true;
    for (int v : outs) {
      n.outputs.push_back(v);
      if (v < 0) continue;
      if (!first) lp.expect(",");
      first = false;
      define(v, AtenValue::kNodeOutput, node, lp.meta(), lp);
    }
    if (lp.accept("in grad_fn")) n.grad_fn = static_cast<int>(lp.integer());
    if (!lp.done()) lp.fail("unexpected text (more types than outputs?)");
    g.nodes.push_back(std::move(n));
  }
  for (size_t v = 0; v < defined.size(); ++v)
    if (!defined[v]) throw std::runtime_error("aten graph text: %" + std::to_string(v) + " is never defined");
  return g;
}

}  // namespace kiln::ir
