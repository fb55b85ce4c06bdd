// Construction, naming, printing and dead-code removal for the captured graph.
#include "graph/graph.h"

#include <algorithm>
#include <cctype>
#include "support/str_builder.h"
#include <functional>
#include <unordered_set>

namespace kiln::graph {

const char* op_name(Op op) {
  switch (op) {
    case Op::kPlaceholder: return "placeholder";
    case Op::kCallFunction: return "call_function";
    case Op::kCallMethod: return "call_method";
    case Op::kOutput: return "output";
  }
  return "?";
}

std::string sanitize_identifier(const std::string& s) {
  std::string out;
  for (char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "_" + out;
  return out;
}

std::string Graph::unique_name(const std::string& hint) {
  std::string base = sanitize_identifier(hint);
  static const std::unordered_set<std::string> reserved = {"self", "forward", "torch", "operator", "builtins", "def", "return", "None", "True", "False", "lambda", "class", "in", "is", "not", "and", "or", "if", "else", "for", "while", "import", "from", "as", "with", "pass", "del", "global", "yield"};
  if (reserved.count(base)) base += "_1";
  std::string name = base;
  int& next = next_suffix_[base];
  while (used_names_.count(name)) name = base + "_" + std::to_string(++next);
  used_names_.insert(name);
  return name;
}

int Graph::add_placeholder(const std::string& hint, std::string meta) {
  Node n;
  n.id = static_cast<int>(nodes_.size());
  n.op = Op::kPlaceholder;
  n.name = unique_name(hint);
  n.target = n.name;
  n.meta = std::move(meta);
  nodes_.push_back(std::move(n));
  ++num_placeholders_;
  return nodes_.back().id;
}

int Graph::add_call(Op op, const std::string& target, int target_handle, std::vector<Arg> args,
                    std::vector<std::pair<std::string, Arg>> kwargs, std::string meta,
                    std::string user_loc) {
  Node n;
  n.id = static_cast<int>(nodes_.size());
  n.op = op;
  std::string hint = target;
  auto dot = hint.rfind('.');
  if (hint.rfind("torch.ops.", 0) == 0 && dot != std::string::npos) {
    // torch.ops.<ns>.<op>.<overload>: named <op>_<overload> (slice_tensor), as torch.fx names it
    const auto prev = hint.rfind('.', dot - 1);
    std::string overload = hint.substr(dot + 1);
    for (char& c : overload) c = static_cast<char>(tolower(static_cast<unsigned char>(c)));
    hint = hint.substr(prev + 1, dot - prev - 1) + (overload == "default" ? "" : "_" + overload);
  } else if (dot != std::string::npos) {
    hint = hint.substr(dot + 1);
  }
  n.name = unique_name(hint);
  n.target = target;
  n.target_handle = target_handle;
  n.args = std::move(args);
  n.kwargs = std::move(kwargs);
  n.meta = std::move(meta);
  n.user_loc = std::move(user_loc);
  nodes_.push_back(std::move(n));
  return nodes_.back().id;
}

void Graph::set_output(std::vector<Arg> outputs) {
  Node n;
  n.id = static_cast<int>(nodes_.size());
  n.op = Op::kOutput;
  n.name = "output";
  n.target = "output";
  n.args.push_back(Arg::of_seq(Arg::kTuple, std::move(outputs)));
  nodes_.push_back(std::move(n));
}

int Graph::num_calls() const {
  int n = 0;
  for (const auto& node : nodes_) n += (node.op == Op::kCallFunction || node.op == Op::kCallMethod);
  return n;
}

static void render_arg(const Graph& g, const Arg& a, kiln::support::StrBuilder& os) {
  switch (a.kind) {
    case Arg::kNode: os << g.node(a.node).name; return;
    case Arg::kConst: os << a.repr; return;
    case Arg::kTuple:
    case Arg::kList: {
      os << (a.kind == Arg::kTuple ? "(" : "[");
      for (size_t i = 0; i < a.items.size(); ++i) {
        if (i) os << ", ";
        render_arg(g, a.items[i], os);
      }
      if (a.kind == Arg::kTuple && a.items.size() == 1) os << ",";
      os << (a.kind == Arg::kTuple ? ")" : "]");
      return;
    }
  }
}

std::string Graph::to_python() const {
  kiln::support::StrBuilder os;
  os << "def forward(self";
  for (const auto& n : nodes_)
    if (n.op == Op::kPlaceholder) os << ", " << n.name;
  os << "):\n";
  for (const auto& n : nodes_) {
    if (n.op == Op::kPlaceholder) {
      if (!n.meta.empty()) os << "    # " << n.name << ": " << n.meta << "\n";
      continue;
    }
    kiln::support::StrBuilder line;
    if (n.op == Op::kOutput) {
      line << "    return ";
      render_arg(*this, n.args[0], line);
      os << line.str() << "\n";
      continue;
    }
    line << "    " << n.name << " = ";
    size_t first = 0;
    if (n.op == Op::kCallMethod) {
      render_arg(*this, n.args.at(0), line);
      line << "." << n.target << "(";
      first = 1;
    } else {
      line << n.target << "(";
    }
    bool comma = false;
    for (size_t i = first; i < n.args.size(); ++i) {
      if (comma) line << ", ";
      render_arg(*this, n.args[i], line);
      comma = true;
    }
    for (const auto& kv : n.kwargs) {
      if (comma) line << ", ";
      line << kv.first << "=";
      render_arg(*this, kv.second, line);
      comma = true;
    }
    line << ")";
    if (!n.meta.empty() || !n.user_loc.empty()) {
      line << "  #";
      if (!n.meta.empty()) line << " " << n.meta;
      if (!n.user_loc.empty()) line << " " << n.user_loc;
    }
    os << line.str() << "\n";
  }
  return os.str();
}

static void mark_uses(const Arg& a, std::vector<bool>& live) {
  if (a.kind == Arg::kNode) live[a.node] = true;
  for (const auto& it : a.items) mark_uses(it, live);
}

int Graph::eliminate_dead_code(const std::vector<bool>& is_pure) {
  std::vector<bool> live(nodes_.size(), false);
  for (int i = static_cast<int>(nodes_.size()) - 1; i >= 0; --i) {
    const Node& n = nodes_[i];
    bool keep = n.op == Op::kOutput || n.op == Op::kPlaceholder || live[i] ||
                (i < static_cast<int>(is_pure.size()) && !is_pure[i]);
    if (!keep) continue;
    live[i] = true;
    for (const auto& a : n.args) mark_uses(a, live);
    for (const auto& kv : n.kwargs) mark_uses(kv.second, live);
  }
  return compact(live);
}

int Graph::compact(const std::vector<bool>& live) {
  std::vector<int> remap(nodes_.size(), -1);
  std::vector<Node> kept;
  for (auto& n : nodes_)
    if (live[n.id]) { remap[n.id] = static_cast<int>(kept.size()); kept.push_back(std::move(n)); }
  int removed = static_cast<int>(nodes_.size() - kept.size());
  std::function<void(Arg&)> fix = [&](Arg& a) {
    if (a.kind == Arg::kNode) a.node = remap[a.node];
    for (auto& it : a.items) fix(it);
  };
  num_placeholders_ = 0;
  for (auto& n : kept) {
    n.id = remap[n.id];
    for (auto& a : n.args) fix(a);
    for (auto& kv : n.kwargs) fix(kv.second);
    if (n.op == Op::kPlaceholder) ++num_placeholders_;
  }
  nodes_ = std::move(kept);
  return removed;
}

std::vector<bool> Graph::remove_unused_placeholders() {
  std::vector<bool> used(nodes_.size(), false);
  for (const Node& n : nodes_) {
    if (n.op == Op::kPlaceholder) continue;
    for (const auto& a : n.args) mark_uses(a, used);
    for (const auto& kv : n.kwargs) mark_uses(kv.second, used);
  }
  std::vector<bool> kept_inputs, live(nodes_.size(), true);
  for (const Node& n : nodes_)
    if (n.op == Op::kPlaceholder) {
      kept_inputs.push_back(used[n.id]);
      live[n.id] = used[n.id];
    }
  compact(live);
  return kept_inputs;
}

}  // namespace kiln::graph
