// The loop-IR operator tables; see loop_ops.h.
#include "ir/loop_ops.h"

#include <cstring>

namespace kiln::ir {

namespace {
#define KILN_OP_ROW(e, name, flags, cpp, cuda) {name, flags, cpp, cuda},
const OpInfo kUnary[] = {KILN_UNARY_OPS(KILN_OP_ROW)};
const OpInfo kBinary[] = {KILN_BINARY_OPS(KILN_OP_ROW)};
#undef KILN_OP_ROW
#define KILN_REDUCE_ROW(e, name, parts, identity, flags, combine) {name, parts, identity, flags, combine},
const ReduceInfo kReduce[] = {KILN_REDUCE_OPS(KILN_REDUCE_ROW)};
#undef KILN_REDUCE_ROW

template <class Op, class Row, size_t N>
bool find(const Row (&rows)[N], const std::string& name, Op* out) {
  for (size_t i = 0; i < N; ++i)
    if (name == rows[i].name) {
      *out = static_cast<Op>(i);
      return true;
    }
  return false;
}
}  // namespace

const OpInfo& info(UnaryOp op) { return kUnary[static_cast<size_t>(op)]; }
const OpInfo& info(BinaryOp op) { return kBinary[static_cast<size_t>(op)]; }
const ReduceInfo& info(ReduceOp op) { return kReduce[static_cast<size_t>(op)]; }

bool unary_op_named(const std::string& name, UnaryOp* out) { return find(kUnary, name, out); }
bool binary_op_named(const std::string& name, BinaryOp* out) { return find(kBinary, name, out); }
bool reduce_op_named(const std::string& name, ReduceOp* out) { return find(kReduce, name, out); }

}  // namespace kiln::ir
