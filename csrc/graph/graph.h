// The captured graph: a small fx-like IR (placeholder, call_function, call_method, output).
//
// It holds no Python objects. Call targets and constants that only Python can represent
// (a torch function, a dtype, a slice) are opaque handles into a table the frontend owns;
// the graph keeps their printable names so it can render itself as readable Python, which is
// what logs, dumps and golden tests read.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace kiln::graph {

// An argument: a reference to a node's value, a constant (by handle, with its repr), or a
// tuple/list of arguments.
struct Arg {
  enum Kind { kNode, kConst, kTuple, kList } kind = kConst;
  int node = -1;            // kNode
  int handle = -1;          // kConst: index in the owner's object table
  std::string repr;         // kConst: how to print it
  std::vector<Arg> items;   // kTuple / kList

  static Arg of_node(int n) { Arg a; a.kind = kNode; a.node = n; return a; }
  static Arg of_const(int handle, std::string repr) { Arg a; a.kind = kConst; a.handle = handle; a.repr = std::move(repr); return a; }
  static Arg of_seq(Kind k, std::vector<Arg> items) { Arg a; a.kind = k; a.items = std::move(items); return a; }
};

enum class Op { kPlaceholder, kCallFunction, kCallMethod, kOutput };
const char* op_name(Op op);

struct Node {
  int id = -1;
  Op op = Op::kCallFunction;
  std::string name;          // unique, a valid Python identifier
  std::string target;        // printable target: qualified function name or method name
  int target_handle = -1;    // kCallFunction: handle of the callable
  std::vector<Arg> args;
  std::vector<std::pair<std::string, Arg>> kwargs;
  std::string meta;          // e.g. "f32[4, 8]" of the value, for printing
  std::string user_loc;      // "file:line" of the user code that produced it
};

class Graph {
 public:
  int add_placeholder(const std::string& hint, std::string meta = "");
  int add_call(Op op, const std::string& target, int target_handle, std::vector<Arg> args,
               std::vector<std::pair<std::string, Arg>> kwargs, std::string meta = "",
               std::string user_loc = "");
  void set_output(std::vector<Arg> outputs);

  const std::vector<Node>& nodes() const { return nodes_; }
  const Node& node(int id) const { return nodes_.at(id); }
  int num_placeholders() const { return num_placeholders_; }
  const Node& output() const { return nodes_.back(); }
  // Number of call nodes (the graph's "size").
  int num_calls() const;

  // Renders the graph as a Python function, e.g.
  //   def forward(self, l_x_):  # f32[4]
  //       add = operator.add(l_x_, 1)  # f32[4]
  //       return (add,)
  std::string to_python() const;
  // Removes call nodes whose values no output or other live node reads (only pure nodes:
  // the caller says which are pure). Returns how many were removed.
  int eliminate_dead_code(const std::vector<bool>& is_pure);
  // Removes placeholders no node and no output reads; returns, per placeholder before the
  // removal (in input order), whether it was kept.
  std::vector<bool> remove_unused_placeholders();

 private:
  std::string unique_name(const std::string& hint);
  int compact(const std::vector<bool>& live);  // keeps the live nodes, renumbered; returns how many went
  std::vector<Node> nodes_;
  std::unordered_set<std::string> used_names_;
  std::unordered_map<std::string, int> next_suffix_;  // per base name: the next suffix to try
  int num_placeholders_ = 0;
};

std::string sanitize_identifier(const std::string& s);

}  // namespace kiln::graph
