// The loop IR: buffers with layouts, element expressions, kernels made of stages, and the
// program of kernel launches and extern ATen calls that a CompiledGraph runs.
//
// A kernel has an outer loop nest (run in parallel) and, inside it, a sequence of stages. A
// stage is either pointwise (an inner loop nest that stores an expression into a buffer) or a
// reduction (an inner loop nest that folds an expression into a local that later stages of the
// same kernel read, and that may also be stored). This one shape covers a plain pointwise loop,
// a reduction, and fused row kernels such as softmax or layer norm with their prologues and
// epilogues. Variables: x0..x(k-1) are the outer loop variables, later ids are inner ones.
#pragma once
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "ir/dtype.h"
#include "ir/index_expr.h"
#include "ir/loop_ops.h"

namespace kiln::ir {

struct Buffer {
  enum Kind { kInput, kConstant, kKernelOutput, kExternOutput } kind = kKernelOutput;
  int index = -1;               // kInput / kConstant: position in the graph's inputs / constants
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> sizes, strides;
  int64_t offset = 0;           // element offset into the data pointer
  int64_t numel() const;
  // Element index of a multi-dimensional index.
  Index element_index(const std::vector<Index>& idx) const;
};

struct Expr;
using ExprPtr = std::shared_ptr<const Expr>;

struct Expr {
  enum Kind { kLoad, kConst, kUnary, kBinary, kWhere, kCast, kIndexValue, kLocal } kind = kConst;
  DType dtype = DType::kFloat32;
  UnaryOp unary_op{};           // kUnary (ir/loop_ops.h)
  BinaryOp binary_op{};         // kBinary
  std::vector<ExprPtr> args;
  int buffer = -1;              // kLoad
  Index index;                  // kLoad: element index; kIndexValue: the value
  double value = 0;             // kConst
  int local = -1;               // kLocal: reduction result id within the kernel
  int local_part = 0;           // kLocal: 0 = value (mean for welford), 1 = m2/index, ...
  // kLoad through tensor-valued indices (embedding, gather): element index += value * stride,
  // where value must lie in [0, bound) (checked at run time, as eager does).
  struct Indirect { ExprPtr value; int64_t stride; int64_t bound; };
  std::vector<Indirect> indirect;
};

ExprPtr load(int buffer, DType dtype, Index index);
ExprPtr constant(double v, DType dtype);
ExprPtr unary(UnaryOp op, ExprPtr a, DType out);
ExprPtr binary(BinaryOp op, ExprPtr a, ExprPtr b, DType out);
ExprPtr where(ExprPtr c, ExprPtr a, ExprPtr b, DType out);
ExprPtr cast(ExprPtr a, DType to);
ExprPtr index_value(Index i, DType dtype);
// Number of nodes in the expression (how expensive inlining it again would be).
int expr_size(const ExprPtr& e);
std::string expr_string(const ExprPtr& e);

struct Stage {
  enum Kind { kPointwise, kReduction } kind = kPointwise;
  std::vector<int64_t> inner_sizes;   // inner loop extents; variables numbered after the outer ones
  ExprPtr value;
  // kPointwise: where the value is stored. kReduction (optional): every element folded is also
  // stored there (softmax keeps exp(x - max) for its epilogue instead of computing it again).
  int out_buffer = -1;
  Index out_index;                    // element index into out_buffer
  ReduceOp reduce = ReduceOp::kSum;   // kReduction

  int local = -1;                     // result id other stages read through Expr::kLocal
  DType acc_dtype = DType::kFloat32;
  std::vector<int> store_buffers;     // where the result is stored (by part), -1 = not stored
  std::vector<Index> store_index;     // element index over outer variables
  std::vector<int64_t> reduction_numel_divisor;  // welford: n for mean/var (unused otherwise)
};

// Buffers a stage writes.
std::vector<int> stage_outputs(const Stage& s);
// Buffers an expression loads (indirect positions included), added to `out`.
void loaded_buffers(const ExprPtr& e, std::set<int>& out);

struct Kernel {
  std::string name;
  std::vector<int64_t> outer_sizes;
  std::vector<Stage> stages;
  std::vector<std::string> fused;     // the ATen nodes it computes, for comments and logs
  int num_locals = 0;
};

struct Step {
  enum Kind { kKernel, kExtern } kind = kKernel;
  int kernel = -1;                    // kKernel
  int node = -1;                      // kExtern: index of the ATen node to call
  std::string op;                     // kExtern: its ATen operator ("aten::mm"), for the text form
  std::vector<int> args;              // kExtern: buffer per tensor argument slot (flattened), -1 = None
  std::vector<int> outputs;           // buffers the step defines (kernel outputs it writes, extern results)
};

struct Program {
  std::vector<Buffer> buffers;
  std::vector<Kernel> kernels;
  std::vector<Step> steps;
  std::vector<int> outputs;           // buffers returned
  std::vector<std::pair<int, int>> input_mutations;  // (input index, buffer with its new contents)
  std::vector<std::vector<int>> frees;  // per step: buffers to release after it
  std::vector<int> reuse_of;          // per buffer: buffer whose memory it takes over, or -1
  std::string to_string() const;      // textual form of the whole program
};

// Per kernel: the buffers it writes first, in the order the runtime allocates them (kernels run
// in id order).
std::vector<std::vector<int>> kernel_allocations(const Program& p);

std::string kernel_string(const Kernel& k, const Program& p);

}  // namespace kiln::ir
