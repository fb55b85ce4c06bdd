// Graph IR: construction, naming, textual form, dead-code removal.
#include <gtest/gtest.h>

#include "graph/graph.h"

using namespace kiln::graph;

TEST(Graph, PrintsAsPython) {
  Graph g;
  int x = g.add_placeholder("l_x_", "f32[4]");
  int a = g.add_call(Op::kCallFunction, "operator.add", 0, {Arg::of_node(x), Arg::of_const(1, "1")}, {}, "f32[4]");
  int r = g.add_call(Op::kCallMethod, "relu", -1, {Arg::of_node(a)}, {});
  g.set_output({Arg::of_node(r)});
  EXPECT_EQ(g.to_python(),
            "def forward(self, l_x_):\n"
            "    # l_x_: f32[4]\n"
            "    add = operator.add(l_x_, 1)  # f32[4]\n"
            "    relu = add.relu()\n"
            "    return (relu,)\n");
  EXPECT_EQ(g.num_calls(), 2);
}

TEST(Graph, UniqueNamesAndKwargs) {
  Graph g;
  int x = g.add_placeholder("x");
  int s1 = g.add_call(Op::kCallFunction, "torch.sum", 0, {Arg::of_node(x)}, {{"dim", Arg::of_const(1, "-1")}});
  int s2 = g.add_call(Op::kCallFunction, "torch.sum", 0, {Arg::of_node(s1)}, {});
  g.set_output({Arg::of_seq(Arg::kTuple, {Arg::of_node(s2)})});
  EXPECT_EQ(g.node(s1).name, "sum");
  EXPECT_EQ(g.node(s2).name, "sum_1");
  EXPECT_NE(g.to_python().find("sum = torch.sum(x, dim=-1)"), std::string::npos);
}

TEST(Graph, DeadCodeRemovesOnlyRemovableNodes) {
  Graph g;
  int x = g.add_placeholder("x");
  int a = g.add_call(Op::kCallFunction, "f", 0, {Arg::of_node(x)}, {});      // removable, unused
  int b = g.add_call(Op::kCallMethod, "add_", -1, {Arg::of_node(x)}, {});    // kept: side effect
  int c = g.add_call(Op::kCallFunction, "g", 0, {Arg::of_node(x)}, {});      // used by output
  g.set_output({Arg::of_node(c)});
  (void)a; (void)b;
  std::vector<bool> pure = {true, true, false, true, true};
  EXPECT_EQ(g.eliminate_dead_code(pure), 1);
  EXPECT_EQ(g.nodes().size(), 4u);
  EXPECT_EQ(g.output().args[0].items[0].node, 2);
  EXPECT_EQ(g.node(2).name, "g");
}

TEST(Graph, SanitizesIdentifiers) {
  EXPECT_EQ(sanitize_identifier("L['self'].fc"), "L__self___fc");
  EXPECT_EQ(sanitize_identifier("0abc"), "_0abc");
}

TEST(Graph, NamingStaysLinearForRepeatedTargets) {
  // 20k nodes of the same target: naming must not rescan (this took minutes when quadratic).
  Graph g;
  int x = g.add_placeholder("x");
  int last = x;
  for (int i = 0; i < 20000; ++i) last = g.add_call(Op::kCallFunction, "torch.tanh", 0, {Arg::of_node(last)}, {});
  EXPECT_EQ(g.node(last).name, "tanh_19999");
  int clash = g.add_placeholder("tanh_5");
  EXPECT_EQ(g.node(clash).name, "tanh_5_1");
}
