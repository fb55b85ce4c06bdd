// The functional ATen graph that the torch_bridge tracer records and lowering reads.
//
// Plain C++ (no ATen headers): each value is a tensor with its dtype, sizes, strides and
// storage offset as seen when the graph was traced; each node is one ATen operator
// ("aten::add.Tensor") with its arguments in schema order. Tensor constants (weights a
// graph closes over, wrapped-number scalars kept as tensors) are indices into a table the
// bridge owns.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/dtype.h"

namespace kiln::ir {

struct TensorMeta {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  int64_t storage_offset = 0;
  bool cpu = true;
  int64_t numel() const;
  bool is_contiguous() const;
  std::string to_string() const;  // "f32[4, 8]{8, 1}"
};

// One argument in schema order.
struct AtenArg {
  enum Kind { kNone, kTensor, kInt, kDouble, kBool, kString, kIntList, kDoubleList, kBoolList, kTensorList, kDType, kOther };
  Kind kind = kNone;
  int value = -1;                 // kTensor: value id
  int64_t i = 0;                  // kInt, kBool, kDType
  double d = 0;                   // kDouble
  std::string s;                  // kString, kOther (printed form)
  std::vector<int64_t> ints;      // kIntList, kBoolList
  std::vector<double> doubles;    // kDoubleList
  std::vector<int> values;        // kTensorList (-1 for None entries)
  std::string name;               // the schema's name for the argument
  std::string to_string() const;
};

struct AtenValue {
  enum Kind { kInput, kConstant, kNodeOutput } kind = kNodeOutput;
  int index = -1;   // kInput: input position; kConstant: constant-table index; kNodeOutput: node id
  TensorMeta meta;
};

struct AtenNode {
  std::string op;                 // "aten::add.Tensor"
  std::vector<AtenArg> args;
  std::vector<int> outputs;       // value ids (-1 for non-tensor outputs)
  bool nondeterministic = false;  // random ops: never folded or duplicated
  bool list_output = false;       // the operator returns one Tensor[] (outputs are its items)
  // In a joint trace's backward: which autograd node's formula recorded it (numbered in the order
  // they ran; -1 outside any: forward operators, the engine's sums of gradients). Text: "in grad_fn N".
  int grad_fn = -1;
  const AtenArg* arg(const std::string& name) const;
};

struct AtenGraph {
  std::vector<AtenValue> values;
  std::vector<AtenNode> nodes;
  int num_inputs = 0;
  std::vector<int> outputs;                          // value ids of the graph's outputs
  std::vector<std::pair<int, int>> input_mutations;  // (input index, value holding its new contents)

  int add_value(AtenValue::Kind kind, int index, TensorMeta meta);
  // Readable form, one line per node:  %5 = aten::mul.Tensor(%0, other=%4) : f32[4, 8]{8, 1}
  std::string to_string() const;
  // The inverse of to_string (for tests and tools: IR in, IR out). Throws std::runtime_error
  // naming the line on malformed text.
  static AtenGraph parse(const std::string& text);
  // Number of readers of each value (nodes and graph outputs).
  std::vector<int> use_counts() const;
};

// Whether the operator raises on some values of its inputs (an index out of range, an integer
// division by zero): such a node runs even when nothing reads its result, as in eager.
bool raises_on_values(const AtenGraph& g, const AtenNode& n);

// Whether the operator (any overload) returns a view of its first argument in eager.
bool is_view_operator(const std::string& op);
// `v`, then the tensor each view operator on the way read: [v, its base, ..., the first value not
// made by a view operator] (at most 65 values).
std::vector<int> view_chain(const AtenGraph& g, int v);

}  // namespace kiln::ir
