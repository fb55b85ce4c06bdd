// Symbols and shape guards of one capture (see shape_env.h).
#include "symbolic/shape_env.h"

#include <stdexcept>

namespace kiln::sym {

int ShapeEnv::new_symbol(std::string source, int input, int dim, int64_t hint) {
  symbols_.push_back({std::move(source), input, dim, hint});
  hints_.push_back(hint);
  return static_cast<int>(symbols_.size()) - 1;
}

int ShapeEnv::symbol_with_hint(int64_t hint) const {
  for (size_t i = 0; i < hints_.size(); ++i)
    if (hints_[i] == hint) return static_cast<int>(i);
  return -1;
}

void ShapeEnv::add_guard(const Expr& b) {
  if (known(b)) return;
  for (const auto& g : guards_)
    if (g.same(b)) return;
  guards_.push_back(b);
}

bool ShapeEnv::guard_bool(const Expr& b) {
  if (auto k = known(b)) return *k;
  bool v = b.eval(hints_.data()) != 0;
  add_guard(v ? b : logical_not(b));
  return v;
}

int64_t ShapeEnv::guard_int(const Expr& e) {
  if (e.is_constant()) return e.constant_value();
  int64_t v = e.eval(hints_.data());
  add_guard(compare(Cmp::kEq, e, Expr::constant(v)));
  return v;
}

std::string ShapeEnv::to_string() const {
  std::string s;
  for (size_t i = 0; i < symbols_.size(); ++i)
    s += "s" + std::to_string(i) + " = " + symbols_[i].source + "  # " + std::to_string(symbols_[i].hint) + " when captured\n";
  for (const auto& g : guards_) s += "check(" + g.str() + ")\n";
  return s;
}

bool ShapeGuards::check(const int64_t* symbols) const {
  try {
    for (const auto& g : guards)
      if (!g.eval(symbols)) return false;
  } catch (const std::exception&) {  // a division by zero, an int64 overflow
    return false;
  }
  return true;
}

std::string ShapeGuards::first_failure(const int64_t* symbols) const {
  for (const auto& g : guards) {
    bool ok = false;
    try { ok = g.eval(symbols) != 0; } catch (const std::exception&) {}  // a division by zero, an int64 overflow
    if (ok) continue;
    std::vector<int> ids;
    g.collect_symbols(ids);
    std::string vals;
    std::vector<bool> seen(num_symbols, false);
    for (int id : ids) {
      if (id < 0 || id >= num_symbols || seen[id]) continue;
      seen[id] = true;
      vals += (vals.empty() ? "" : ", ") + ("s" + std::to_string(id)) + " = " + std::to_string(symbols[id]);
    }
    return g.str() + " (" + vals + ")";
  }
  return "";
}

}  // namespace kiln::sym
