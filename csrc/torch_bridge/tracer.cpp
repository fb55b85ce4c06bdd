// The dispatcher-level tracer; see tracer.h for the approach.
#include "torch_bridge/tracer.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/FunctionalTensorWrapper.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/ones.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/basic_ops.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/library.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "torch_bridge/autograd_node.h"

namespace kiln::bridge {

static_assert(static_cast<int>(c10::ScalarType::Float) == static_cast<int>(ir::DType::kFloat32));
static_assert(static_cast<int>(c10::ScalarType::BFloat16) == static_cast<int>(ir::DType::kBFloat16));
static_assert(static_cast<int>(c10::ScalarType::Bool) == static_cast<int>(ir::DType::kBool));

namespace {

struct TraceState {
  TraceResult result;
  std::unordered_map<const c10::TensorImpl*, int> ids;  // real tensor -> value id
  // So no TensorImpl address is reused while `ids` holds it: a weak reference keeps the object
  // (not its storage: a dead tensor's memory goes back at once, as in eager; holding the tensors
  // themselves made a first call's peak memory the sum of every intermediate result).
  std::vector<c10::weak_intrusive_ptr<c10::TensorImpl>> keep_alive;
};

thread_local TraceState* t_state = nullptr;
// A joint trace's backward of CUDA tensors runs on the autograd engine's worker thread for the
// device, which inherits the caller's dispatch keys (the Fake key that leads here) but not
// t_state: while trace_joint waits for torch::autograd::grad, the operators of that backward find
// the trace here (only threads with the Fake key included reach the fallback: the tracing thread
// and the engine's threads working for it). One joint backward at a time (g_joint_backward), and
// its operators record one at a time (g_backward_record: one engine thread per device).
std::atomic<TraceState*> g_backward_state{nullptr};
// The autograd node whose formula this thread runs in a joint backward (AtenNode::grad_fn), set by
// hooks on every node of the traced graph: its operators are one node's work, which eager skips
// whole when none of the node's gradients is defined (autograd/absent_tangents.cpp).
thread_local int t_grad_fn = -1;
std::atomic<int> g_next_grad_fn{0};

struct EnterGradFn : torch::autograd::FunctionPreHook {
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& grads) override {
    t_grad_fn = g_next_grad_fn.fetch_add(1);
    return grads;
  }
};
struct LeaveGradFn : torch::autograd::FunctionPostHook {
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& grad_inputs, const torch::autograd::variable_list&) override {
    t_grad_fn = -1;
    return grad_inputs;
  }
};
std::mutex g_joint_backward;
std::mutex g_backward_record;

int value_of(TraceState& s, const at::Tensor& t) {
  auto it = s.ids.find(t.unsafeGetTensorImpl());
  if (it != s.ids.end()) return it->second;
  // A tensor the graph did not produce and was not given: a constant it closes over.
  int index = static_cast<int>(s.result.constants.size());
  s.result.constants.push_back(t);
  int v = s.result.graph.add_value(ir::AtenValue::kConstant, index, meta_of(t));
  s.ids[t.unsafeGetTensorImpl()] = v;
  return v;
}

[[noreturn]] void fail(const std::string& why) { throw std::runtime_error(why); }

ir::AtenArg record_arg(TraceState& s, const c10::IValue& v, const c10::Argument& schema_arg) {
  ir::AtenArg a;
  a.name = schema_arg.name();
  if (v.isNone()) {
    a.kind = ir::AtenArg::kNone;
  } else if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!t.defined()) { a.kind = ir::AtenArg::kNone; return a; }
    a.kind = ir::AtenArg::kTensor;
    a.value = value_of(s, t);
  } else if (v.isBool()) {
    a.kind = ir::AtenArg::kBool; a.i = v.toBool();
  } else if (v.isInt()) {
    auto kind = schema_arg.real_type()->kind();
    bool is_dtype = kind == c10::TypeKind::ScalarTypeType ||
                    (kind == c10::TypeKind::OptionalType && schema_arg.real_type()->containedType(0)->kind() == c10::TypeKind::ScalarTypeType);
    a.kind = is_dtype ? ir::AtenArg::kDType : ir::AtenArg::kInt;
    a.i = v.toInt();
  } else if (v.isDouble()) {
    a.kind = ir::AtenArg::kDouble; a.d = v.toDouble();
  } else if (v.isString()) {
    a.kind = ir::AtenArg::kString; a.s = v.toStringRef();
  } else if (v.isIntList()) {
    a.kind = ir::AtenArg::kIntList; a.ints = v.toIntVector();
  } else if (v.isDoubleList()) {
    a.kind = ir::AtenArg::kDoubleList; a.doubles = v.toDoubleVector();
  } else if (v.isBoolList()) {
    a.kind = ir::AtenArg::kBoolList;
    for (bool b : v.toBoolList()) a.ints.push_back(b);
  } else if (v.isTensorList()) {
    a.kind = ir::AtenArg::kTensorList;
    for (const at::Tensor& t : v.toTensorVector()) a.values.push_back(t.defined() ? value_of(s, t) : -1);
  } else if (v.isList()) {
    // List[Optional[Tensor]] (index.Tensor and friends).
    a.kind = ir::AtenArg::kTensorList;
    for (const c10::IValue& e : v.toListRef()) {
      if (e.isNone()) a.values.push_back(-1);
      else if (e.isTensor()) a.values.push_back(e.toTensor().defined() ? value_of(s, e.toTensor()) : -1);
      else fail("unsupported list argument '" + a.name + "'");
    }
  } else if (v.isDevice() || v.isGenerator() || v.isScalar()) {
    if (v.isComplexDouble()) fail("complex scalar argument '" + a.name + "'");
    a.kind = ir::AtenArg::kOther;
    a.s = v.isDevice() ? v.toDevice().str() : v.isGenerator() ? "<generator>" : "<scalar>";
  } else {
    fail("unsupported argument '" + a.name + "' of type " + v.tagKind());
  }
  return a;
}

// Advanced indexing is tagged as having a dynamic output shape because a boolean mask makes it
// one; with integer index tensors only, the result's shape is the indices' broadcast shape, fixed
// by the inputs' shapes like any other op.
bool static_shape_indexing(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  const c10::FunctionSchema& schema = op.schema();
  if (schema.name() != "aten::index" && schema.name() != "aten::_unsafe_index") return false;
  const size_t n_args = schema.arguments().size();
  for (size_t i = 0; i < n_args; ++i) {
    const c10::IValue& v = stack[stack.size() - n_args + i];
    if (!v.isList() || v.isTensorList()) continue;
    for (const c10::IValue& e : v.toListRef()) {
      if (!e.isTensor() || !e.toTensor().defined()) continue;
      const auto st = e.toTensor().scalar_type();
      if (st == at::kBool || st == at::kByte) return false;
    }
  }
  return true;
}

// The functional forms of the in-place random fills (x.bernoulli_(p) traces as bernoulli.p) and
// dropout: their results are random numbers laid out like a tensor they were given. (Other ops
// tagged random, such as attention with optional dropout, compute their results.)
static bool fills_with_random_numbers(const std::string& op) {
  static const char* fills[] = {"aten::bernoulli", "aten::uniform", "aten::normal", "aten::exponential", "aten::geometric",
                                "aten::log_normal", "aten::cauchy", "aten::random", "aten::native_dropout"};
  const std::string base = op.substr(0, op.find('.'));
  for (const char* f : fills)
    if (base == f || base == std::string(f) + "_functional") return true;
  return false;
}

// Whether a random operator's tensor results have another layout than its input `self` (same
// sizes, different strides), with `self` not contiguous.
static bool random_layout_differs(const at::Tensor& self, const torch::jit::Stack& stack, size_t n_rets) {
  if (!self.defined() || self.is_contiguous()) return false;
  for (size_t i = 0; i < n_rets; ++i) {
    const c10::IValue& r = stack[stack.size() - n_rets + i];
    if (r.isTensor() && r.toTensor().defined() && r.toTensor().sizes() == self.sizes() && r.toTensor().strides() != self.strides())
      return true;
  }
  return false;
}

// Whether an argument of the call on the stack is the meta device.
static bool names_meta_device(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  const size_t n_args = op.schema().arguments().size();
  for (size_t i = 0; i < n_args; ++i) {
    const c10::IValue& v = stack[stack.size() - n_args + i];
    if (v.isDevice() && v.toDevice().is_meta()) return true;
  }
  return false;
}

void trace_fallback(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  const auto below = ks & c10::DispatchKeySet(c10::DispatchKeySet::FULL_AFTER, c10::DispatchKey::Fake);
  TraceState* s = t_state;
  std::unique_lock<std::mutex> recording;
  if (!s && (s = g_backward_state.load(std::memory_order_acquire))) recording = std::unique_lock<std::mutex>(g_backward_record);
  // Functionalization checks in-place ops on meta copies first: not part of the graph (nor the
  // factories that make those copies, which name the meta device instead of taking a tensor).
  if (!s || ks.has_backend(c10::BackendComponent::MetaBit) || names_meta_device(op, *stack)) return op.redispatchBoxed(below, stack);
  const c10::FunctionSchema& schema = op.schema();
  std::string name = schema.name();
  if (!schema.overload_name().empty()) name += "." + schema.overload_name();
  if (op.hasTag(at::Tag::data_dependent_output) || (op.hasTag(at::Tag::dynamic_output_shape) && !static_shape_indexing(op, *stack)))
    fail(name + " has a data-dependent result");
  if (schema.is_mutable()) fail(name + " mutates its arguments after functionalization");

  ir::AtenNode node;
  node.op = name;
  node.grad_fn = t_grad_fn;
  node.nondeterministic = op.hasTag(at::Tag::nondeterministic_seeded);
  const size_t n_args = schema.arguments().size();
  std::vector<c10::IValue> boxed;
  boxed.reserve(n_args);
  for (size_t i = 0; i < n_args; ++i) {
    const c10::IValue& v = (*stack)[stack->size() - n_args + i];
    node.args.push_back(record_arg(*s, v, schema.arguments()[i]));
    // Tensors are filled in again at run time from the arguments' value ids.
    const auto k = node.args.back().kind;
    boxed.push_back(k == ir::AtenArg::kTensor || k == ir::AtenArg::kTensorList ? c10::IValue() : v);
  }
  at::Tensor boxed_self;  // a random operator's first tensor argument (its layout)
  if (node.nondeterministic)
    for (size_t i = 0; i < n_args && !boxed_self.defined(); ++i) {
      const c10::IValue& v = (*stack)[stack->size() - n_args + i];
      if (v.isTensor()) boxed_self = v.toTensor();
    }
  {
    // Whatever the kernel calls internally is an implementation detail, not part of the graph.
    c10::impl::ExcludeDispatchKeyGuard inside(c10::DispatchKeySet({c10::DispatchKey::Fake, c10::DispatchKey::Functionalize}));
    op.redispatchBoxed(below, stack);
  }

  const size_t n_rets = schema.returns().size();
  // A random operator draws its numbers in the memory order of the tensor it fills. Eager fills
  // the tensor in place with the input's layout (`empty_like(x).bernoulli_(p)`); functionalized,
  // the operator makes a tensor of its own layout, so on a non-contiguous input its numbers would
  // land on other elements than eager's: such a graph runs op by op, as eager does.
  if (node.nondeterministic && fills_with_random_numbers(name) && random_layout_differs(boxed_self, *stack, n_rets))
    fail(name + " draws random numbers into another layout than its input's (a non-contiguous tensor)");
  for (size_t i = 0; i < n_rets; ++i) {
    const c10::IValue& r = (*stack)[stack->size() - n_rets + i];
    auto add_output = [&](const at::Tensor& t) {
      if (!t.defined()) { node.outputs.push_back(-1); return; }
      int id = s->result.graph.add_value(ir::AtenValue::kNodeOutput, static_cast<int>(s->result.graph.nodes.size()), meta_of(t));
      s->ids[t.unsafeGetTensorImpl()] = id;  // a later result at a reused address wins
      s->keep_alive.emplace_back(t.getIntrusivePtr());
      node.outputs.push_back(id);
    };
    if (r.isTensor()) add_output(r.toTensor());
    else if (r.isTensorList()) {
      if (n_rets != 1) fail(name + " returns a tensor list among other results");
      node.list_output = true;
      for (const at::Tensor& t : r.toTensorVector()) add_output(t);
    } else if (r.isNone()) node.outputs.push_back(-1);
    // A number beside tensors (cuDNN attention's max sequence lengths, which SDPA on CUDA calls):
    // no graph value; a later operator that takes it records it as the constant it was.
    else if (n_rets > 1 && (r.isInt() || r.isSymInt() || r.isDouble() || r.isBool())) node.outputs.push_back(-1);
    else fail(name + " returns a non-tensor value (" + std::string(r.tagKind()) + ")");
  }
  s->result.graph.nodes.push_back(std::move(node));
  s->result.node_args.push_back(std::move(boxed));
}

std::once_flag g_register_once;
std::string g_unavailable;  // empty when the fallback is registered

void register_fallback() {
  try {
    static auto* lib = new torch::Library(torch::Library::IMPL, "_", c10::DispatchKey::Fake, __FILE__, __LINE__);
    lib->fallback(torch::CppFunction::makeFromBoxedFunction<&trace_fallback>());
  } catch (const std::exception& e) {
    g_unavailable = std::string("cannot register kiln's tracing fallback on the Fake dispatch key: ") + e.what();
  }
}

}  // namespace

bool tracer_available(std::string* why) {
  std::call_once(g_register_once, register_fallback);
  if (why) *why = g_unavailable;
  return g_unavailable.empty();
}

ir::TensorMeta meta_of(const at::Tensor& t) {
  ir::TensorMeta m;
  m.dtype = ir::dtype_from_int(static_cast<int>(t.scalar_type()));
  m.sizes = t.sizes().vec();
  m.strides = t.strides().vec();
  m.storage_offset = t.storage_offset();
  m.cpu = t.device().is_cpu();
  return m;
}

// Unwraps a functional result after syncing its pending updates.
static at::Tensor unwrap(at::Tensor o) {
  if (!o.defined()) return o;
  if (at::functionalization::impl::isFunctionalTensor(o)) {
    at::functionalization::impl::sync(o);
    o = at::functionalization::impl::from_functional_tensor(o);
  }
  return o;
}

// The tracer takes plain strided tensors: no subclass, no functional tensor of someone else's.
static void check_input(const at::Tensor& t, size_t i) {
  if (!t.defined()) fail("input " + std::to_string(i) + " is undefined");
  if (t.layout() != c10::kStrided) fail("input " + std::to_string(i) + " is not a strided tensor");
  if (t.key_set().has_any(c10::DispatchKeySet({c10::DispatchKey::Python, c10::DispatchKey::Functionalize})))
    fail("input " + std::to_string(i) + " is a tensor subclass or functional tensor");
}

// The default CPU generator's state, taken when made; restore() puts it back.
struct RngSnapshot {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  c10::intrusive_ptr<c10::TensorImpl> state;
  RngSnapshot() {
    std::lock_guard<std::mutex> lock(gen.mutex());
    state = gen.get_state().getIntrusivePtr();
  }
  void restore() {
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(at::Tensor(state));
  }
};

TraceResult trace(const std::vector<at::Tensor>& inputs, const GraphRunner& run) {
  std::string why;
  if (!tracer_available(&why)) fail(why);
  if (t_state) fail("nested trace");
  TraceState s;
  std::vector<at::Tensor> functional;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const at::Tensor& t = inputs[i];
    check_input(t, i);
    // Each distinct input tensor gets a value (the same tensor passed twice shares it).
    int v = s.result.graph.add_value(ir::AtenValue::kInput, static_cast<int>(i), meta_of(t));
    s.ids.emplace(t.unsafeGetTensorImpl(), v);
    functional.push_back(at::functionalization::impl::to_functional_tensor(t));
  }
  s.result.graph.num_inputs = static_cast<int>(inputs.size());

  std::vector<at::Tensor> outs;
  // A trace that fails leaves the generator as it found it: the call then runs eagerly and draws
  // what eager would (a successful trace is the call itself).
  RngSnapshot rng;
  t_state = &s;
  try {
    at::functionalization::impl::FunctionalizationReapplyViewsGuard reapply(true);
    c10::impl::IncludeDispatchKeyGuard include(c10::DispatchKeySet({c10::DispatchKey::Functionalize, c10::DispatchKey::Fake}));
    outs = run(functional);
    for (at::Tensor& o : outs) {
      if (!o.defined()) fail("the graph returned an undefined tensor");
      o = unwrap(o);
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      at::functionalization::impl::sync(functional[i]);
      at::Tensor now = at::functionalization::impl::from_functional_tensor(functional[i]);
      if (now.unsafeGetTensorImpl() != inputs[i].unsafeGetTensorImpl())
      {
        s.result.graph.input_mutations.push_back({static_cast<int>(i), value_of(s, now)});
        s.result.mutation_results.push_back(now);
      }
    }
  } catch (...) {
    t_state = nullptr;
    rng.restore();
    throw;
  }
  t_state = nullptr;
  for (const at::Tensor& o : outs) s.result.graph.outputs.push_back(value_of(s, o));
  s.result.outputs = std::move(outs);
  return std::move(s.result);
}

JointTrace trace_joint(const std::vector<at::Tensor>& inputs, const GraphRunner& run, const Unlocked& unlocked) {
  std::string why;
  if (!tracer_available(&why)) fail(why);
  if (t_state) fail("nested trace");
  TraceState s;
  JointTrace jt;
  jt.num_primals = static_cast<int>(inputs.size());
  std::vector<at::Tensor> base, functional, leaves;
  std::vector<int> leaf_of;
  std::vector<const torch::autograd::Node*> identity_of(inputs.size(), nullptr);  // per input that requires grad
  for (size_t i = 0; i < inputs.size(); ++i) {
    const at::Tensor& t = inputs[i];
    check_input(t, i);
    // Inputs that do not require grad get a private copy: under autograd, BatchNorm's running
    // statistics were seen written through to the caller's tensors during this extra run.
    // (Same sizes and strides: the graph is compiled for the caller's layout.)
    if (!t.requires_grad() && t.is_non_overlapping_and_dense())
      base.push_back(at::empty_strided(t.sizes(), t.strides(), t.options()).copy_(t.detach()));
    else
      base.push_back(t.detach());
    int v = s.result.graph.add_value(ir::AtenValue::kInput, static_cast<int>(i), meta_of(t));
    s.ids.emplace(base.back().unsafeGetTensorImpl(), v);
    functional.push_back(at::functionalization::impl::to_functional_tensor(base.back()));
    if (t.requires_grad()) {
      // The gradient is taken for a leaf over the same memory; the graph reads a non-leaf joined
      // to it by an identity node, so the graph may write it in place as eager may write a
      // non-leaf input (its new contents are then a differentiable forward output).
      at::Tensor leaf = at::functionalization::impl::to_functional_tensor(base.back());
      leaf.requires_grad_(true);
      auto identity = make_node<torch::autograd::Identity>();
      identity->set_next_edges({torch::autograd::impl::gradient_edge(leaf)});
      torch::autograd::set_history(functional.back(), identity);
      identity_of[i] = identity.get();
      leaves.push_back(leaf);
      leaf_of.push_back(static_cast<int>(i));
    }
  }
  if (leaves.empty()) fail("no input requires grad");
  // The trace is an extra run the caller does not see: random ops in it must not advance the
  // generator (the call itself then draws what eager would).
  struct RestoreRng {
    RngSnapshot snap;
    ~RestoreRng() { snap.restore(); }
  } restore;
  std::vector<at::Tensor> outs, grads;
  std::vector<std::vector<int>> reaches;  // per leaf: the differentiable outputs whose autograd graph reaches it
  t_state = &s;
  try {
    c10::AutoGradMode grad_mode(true);
    at::functionalization::impl::FunctionalizationReapplyViewsGuard reapply(true);
    c10::impl::IncludeDispatchKeyGuard include(c10::DispatchKeySet({c10::DispatchKey::Functionalize, c10::DispatchKey::Fake}));
    outs = run(functional);
    // Inputs the forward wrote in place: their new contents are forward outputs after the graph's
    // own, for the caller to copy back; differentiable where autograd recorded the write (the
    // input's history moved past its identity node; a write under no_grad, a parameter's
    // initialisation, leaves it a leaf's plain new contents).
    const size_t own = outs.size();
    std::vector<bool> recorded;
    for (size_t i = 0; i < inputs.size(); ++i) {
      at::functionalization::impl::sync(functional[i]);
      if (at::functionalization::impl::from_functional_tensor(functional[i]).unsafeGetTensorImpl() == base[i].unsafeGetTensorImpl()) continue;
      outs.push_back(functional[i]);
      jt.mutated_inputs.push_back(static_cast<int>(i));
      recorded.push_back(identity_of[i] && functional[i].grad_fn().get() != identity_of[i]);
    }
    std::vector<at::Tensor> diff_outs, tangents;
    for (size_t k = 0; k < outs.size(); ++k) {
      const at::Tensor& o = outs[k];
      if (!o.defined()) fail("the graph returned an undefined tensor");
      bool req = k < own ? o.requires_grad() : recorded[k - own];
      jt.output_requires_grad.push_back(req);
      if (!req) continue;
      at::Tensor tangent;
      {
        c10::impl::ExcludeDispatchKeyGuard plain(c10::DispatchKeySet({c10::DispatchKey::Functionalize, c10::DispatchKey::Fake}));
        tangent = at::ones(o.sizes(), o.options().requires_grad(false));
      }
      int v = s.result.graph.add_value(ir::AtenValue::kInput, jt.num_primals + static_cast<int>(tangents.size()), meta_of(tangent));
      s.ids.emplace(tangent.unsafeGetTensorImpl(), v);
      s.keep_alive.emplace_back(tangent.getIntrusivePtr());
      diff_outs.push_back(o);
      tangents.push_back(at::functionalization::impl::to_functional_tensor(tangent));
    }
    if (diff_outs.empty()) fail("no output requires grad");
    // Which differentiable outputs reach each leaf through the autograd graph: a leaf reached only
    // from outputs that get no gradient at run time must keep .grad None, as in eager, even where
    // its formula gives zeros without reading the output's gradient (copysign's `other`).
    reaches.assign(leaves.size(), {});
    // Every node of the graph, held while its hooks are on (they come off after the backward: a
    // node may be the caller's, through a constant with history).
    // (Edge::function is a std::shared_ptr in torch 2.11 and a c10::intrusive_ptr in 2.13.)
    using NodeRef = std::decay_t<decltype(std::declval<torch::autograd::Edge>().function)>;
    std::unordered_map<torch::autograd::Node*, NodeRef> graph_nodes;
    {
      std::unordered_map<const torch::autograd::Node*, int> leaf_node;
      for (size_t k = 0; k < leaves.size(); ++k)
        if (auto acc = torch::autograd::impl::try_get_grad_accumulator(leaves[k])) leaf_node.emplace(acc.get(), static_cast<int>(k));
      for (size_t j = 0; j < diff_outs.size(); ++j) {
        std::vector<NodeRef> stack;
        std::unordered_set<torch::autograd::Node*> seen;
        if (auto fn = diff_outs[j].grad_fn()) stack.push_back(fn);
        else if (auto acc = torch::autograd::impl::try_get_grad_accumulator(diff_outs[j])) stack.push_back(acc);
        while (!stack.empty()) {
          NodeRef n = std::move(stack.back());
          stack.pop_back();
          if (!seen.insert(n.get()).second) continue;
          auto it = leaf_node.find(n.get());
          if (it != leaf_node.end()) reaches[it->second].push_back(static_cast<int>(j));
          for (const auto& e : n->next_edges())
            if (e.function) stack.push_back(e.function);
          graph_nodes.emplace(n.get(), std::move(n));
        }
      }
    }
    struct Hooked {
      std::unordered_map<torch::autograd::Node*, NodeRef>& nodes;
      explicit Hooked(std::unordered_map<torch::autograd::Node*, NodeRef>& n) : nodes(n) {
        for (auto& [raw, node] : nodes) {
          node->add_pre_hook(std::make_unique<EnterGradFn>());
          node->add_post_hook(std::make_unique<LeaveGradFn>());
        }
      }
      ~Hooked() {  // ours are the last ones added
        for (auto& [raw, node] : nodes) {
          auto& pre = node->pre_hooks();
          if (!pre.empty() && dynamic_cast<EnterGradFn*>(pre.back().get())) pre.pop_back();
          auto& post = node->post_hooks();
          if (!post.empty() && dynamic_cast<LeaveGradFn*>(post.back().get())) post.pop_back();
        }
      }
    } hooked(graph_nodes);
    unlocked([&] {
      std::lock_guard<std::mutex> one(g_joint_backward);
      struct Publish {
        explicit Publish(TraceState* st) { g_backward_state.store(st, std::memory_order_release); }
        ~Publish() {
          g_backward_state.store(nullptr, std::memory_order_release);
          t_grad_fn = -1;  // a formula that raised left its node's number behind
        }
      } publish(&s);
      g_next_grad_fn.store(0);
      grads = torch::autograd::grad(diff_outs, leaves, tangents, /*retain_graph=*/false, /*create_graph=*/false, /*allow_unused=*/true);
    });
    for (at::Tensor& o : outs) o = unwrap(o);
    for (at::Tensor& g : grads) g = unwrap(g);
    s.result.graph.num_inputs = jt.num_primals + static_cast<int>(tangents.size());
  } catch (...) {
    t_state = nullptr;
    throw;
  }
  t_state = nullptr;
  for (const at::Tensor& o : outs) s.result.graph.outputs.push_back(value_of(s, o));
  jt.num_fwd_outputs = static_cast<int>(outs.size());  // including the mutated inputs' new contents
  for (size_t k = 0; k < grads.size(); ++k) {
    if (!grads[k].defined()) continue;
    s.result.graph.outputs.push_back(value_of(s, grads[k]));
    jt.grad_of.push_back(leaf_of[k]);
    jt.grad_outputs.push_back(reaches[k]);
  }
  s.result.outputs = std::move(outs);
  jt.trace = std::move(s.result);
  return jt;
}

}  // namespace kiln::bridge
