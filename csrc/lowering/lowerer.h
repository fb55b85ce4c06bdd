// Lowering: the functional ATen graph -> the loop IR (DESIGN §3, Inductor's lowering job).
//
// Each ATen value becomes a TensorValue: either realized in a buffer, or a loader that yields
// any element as an expression, which consumers inline into their own loops (this is vertical
// fusion). Values are realized when an extern call or the graph's outputs need them, when a
// reduction's result is read outside its kernel, or when inlining them again would cost too
// much. Where a realized stage goes (which kernel, in what loop order) is the scheduler's call
// (schedule/placement.h). Operators without a rule become extern ATen calls, so lowering never
// fails on coverage.
#pragma once
#include <functional>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <vector>

#include "ir/aten_graph.h"
#include "ir/loop_ir.h"
#include "schedule/placement.h"

namespace kiln::lowering {

// Where an expression is being built: the kernel it will run in, the ranges of that kernel's
// variables, and whether everything it read is available there.
struct LoadCtx {
  int kernel = -1;
  int num_outer = 0;
  ir::VarRanges ranges;
  bool ok = true;
  std::set<int> nodes;   // ATen nodes whose loaders were inlined (named in the kernel's comment)
  std::set<int> values;  // values whose loaders were inlined
};

using Loader = std::function<ir::ExprPtr(const std::vector<ir::Index>&, LoadCtx&)>;

struct TensorValue {
  ir::TensorMeta meta;
  Loader loader;
  int buffer = -1;                        // realized here
  std::function<int()> realize;           // how to realize it if not the default kernel stage
  int cost = 0;                           // size of its inlined expression
  bool transcendental = false;            // its expression calls exp, sin, erf... (costly per element)
};

struct LoweringOptions {
  int max_inline_cost = 48;    // a value read more than once is realized above this cost
  int max_inline_reads = 4;    // a value read more than once is realized when it loads more buffers
  int max_expression_cost = 400;  // any value is realized above this: the code generator renders
                                  // expressions recursively, so their depth must stay bounded
  bool fuse = true;            // false: every value is realized in its own kernel (debugging)
  // CUDA: a value of several streams that a reduction inlines and later kernels read again is
  // stored by the reduction's kernel as it goes (see Lowerer::store_beside).
  bool store_beside_reductions = true;
  bool cuda = false;           // the program runs on a CUDA device (codegen/cuda): tensors on the CPU
                               // go to ATen instead, and fp16 is lowered (computed in float)
  bool extern_only = false;    // every node an ATen call, no kernels ("aot_eager": op by op)
};

class Lowerer {
 public:
  Lowerer(const ir::AtenGraph& g, LoweringOptions opts = {});
  ir::Program run();

  // --- used by the rule files --------------------------------------------------------------
  const ir::AtenGraph& graph() const { return g_; }
  TensorValue& value(int id) { return values_.at(id); }
  const ir::TensorMeta& meta(int id) const { return g_.values.at(id).meta; }
  // Loader of an argument broadcast to `sizes` (tensor or scalar), producing `dtype`.
  Loader arg_loader(const ir::AtenArg& a, const std::vector<int64_t>& sizes, ir::DType dtype);
  Loader broadcast(int value, const std::vector<int64_t>& sizes);
  int ensure_buffer(int value);
  // Defines `out` (a node output) as a lazy pointwise value.
  void define(int out, Loader loader, int cost);
  // Places a reduction of `input` over `dims` and defines the requested outputs from its parts.
  struct ReductionOut { int value; int part; std::function<ir::ExprPtr(ir::ExprPtr, LoadCtx&)> finish; };
  // With `keep_elements` >= 0, every element folded is also stored into that buffer (laid out
  // over `input_sizes`), for an epilogue that reads it back instead of recomputing it.
  void reduction(ir::ReduceOp op, Loader input, const std::vector<int64_t>& input_sizes,
                 std::vector<int64_t> dims, ir::DType acc, const std::vector<ReductionOut>& outs,
                 int keep_elements = -1);
  // A load of kernel-written `buffer` from a stage in the kernel that writes it (after the
  // writing stage) or a later one; anywhere else the stage cannot go (ctx.ok = false).
  ir::ExprPtr load_written(int buffer, const std::vector<ir::Index>& idx, LoadCtx& ctx);
  // Writes `loader` over `sizes` into `buffer` at element index base + sum(idx*strides).
  // (Arguments by value: lowering may grow its tables while the stage is being built.)
  // `computes_current_node`: the node being lowered is what this stage computes (cat), rather than
  // a consumer that needs an earlier value realized.
  void store_region(int buffer, const std::vector<int64_t> sizes, const std::vector<int64_t> strides,
                    int64_t offset, const Loader loader, bool computes_current_node);
  void extern_call(int node);
  // A load of `value` (realized into a buffer) at `idx`, where dimension `dim` is instead taken
  // from the integer expression `position` (bounds-checked at run time).
  ir::ExprPtr indirect_load(int value, std::vector<ir::Index> idx, int dim, ir::ExprPtr position, LoadCtx& ctx);
  int current_node() const { return node_; }
  // Readers of a graph value (nodes and graph outputs).
  int uses(int value) const { return uses_.at(value); }
  int new_buffer(ir::Buffer::Kind kind, const ir::TensorMeta& m, int index = -1);
  const ir::Program& program() const { return prog_; }
  bool cuda() const { return opts_.cuda; }
  std::string node_label(int node) const;

 private:
  friend class Placement;
  bool lower_node(int node);
  int realize_pointwise(int value);
  void store_beside(const std::set<int>& inlined, int kernel);
  void drop_unread_beside_stores();
  void set_buffer_loader(int value, int buf);
  ir::ExprPtr buffer_load(int buf, const std::vector<ir::Index>& idx, LoadCtx& ctx) const;
  int buffers_read(int value);
  void note_fused(int kernel, const LoadCtx& ctx, bool current_node);

  const ir::AtenGraph& g_;
  LoweringOptions opts_;
  std::vector<TensorValue> values_;
  std::vector<int> uses_;
  std::vector<int> readers_;              // per value: distinct nodes (and graph outputs) reading it
  std::vector<int> beside_buffers_;       // buffers store_beside added
  std::vector<bool> broadcast_read_;      // per value: some reader's output has more elements
  ir::Program prog_;
  std::vector<int> producer_step_;        // per buffer: step that writes it (-1: inputs, constants)
  std::unique_ptr<schedule::Placement> placement_;
  std::vector<std::set<int>> kernel_nodes_;  // per kernel: the ATen nodes it computes
  std::set<int> column_kernels_;             // kernels holding a column reduction (reads_columns)
  int node_ = -1;
};

// Rule tables, one per family of operators; each returns false when it does not apply.
bool lower_pointwise(Lowerer& L, const ir::AtenNode& n);
bool lower_reduction(Lowerer& L, const ir::AtenNode& n);
// BatchNorm in inference: ATen's operators, or cuDNN's (what BatchNorm runs on CUDA float
// tensors); its saved statistics are empty tensors.
bool is_inference_batch_norm(const ir::AtenNode& n);
bool lower_view(Lowerer& L, const ir::AtenNode& n);
bool lower_cat(Lowerer& L, const ir::AtenNode& n);
bool lower_indexing(Lowerer& L, const ir::AtenNode& n);
bool lower_pooling(Lowerer& L, const ir::AtenNode& n);

// Maps an index over `to` sizes onto `from` sizes with the same number of elements (row-major
// flatten, then unflatten), simplified by the variables' ranges: the index algebra of reshape.
std::vector<ir::Index> reshape_index(const std::vector<ir::Index>& idx, const std::vector<int64_t>& to,
                                     const std::vector<int64_t>& from, const ir::VarRanges& ranges);
// Contiguous strides for sizes.
std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& sizes);

}  // namespace kiln::lowering
