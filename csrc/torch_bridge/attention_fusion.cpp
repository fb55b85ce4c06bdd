// Hand-written attention replaced by SDPA's kernel; see attention_fusion.h.
#include "torch_bridge/attention_fusion.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

#include "torch_bridge/value_evaluation.h"

namespace kiln::bridge {
using ir::AtenArg;
using ir::AtenGraph;
using ir::AtenNode;
using ir::AtenValue;
using ir::TensorMeta;

namespace {

struct Match {
  int q = -1, k = -1, v = -1;   // [B, H, L, D], [B, H, S, D], [B, H, S, Dv]
  int out = -1, out_node = -1;  // the [B, H, L, Dv] result and the view that makes it
  std::vector<int> replaced;    // the pattern's nodes from the scores to the result
  double scale = 1;
  int mask = -1;                // masked_fill's mask (true: masked out), if any
  int bias = -1;                // or the additive bias, if any
};

class Matcher {
 public:
  explicit Matcher(const TraceResult& tr) : g_(tr.graph), tr_(tr), uses_(g_.use_counts()) {}

  std::optional<Match> at(int bmm_node) {
    Match m;
    const AtenNode& o = g_.nodes[static_cast<size_t>(bmm_node)];
    if (o.op != "aten::bmm" || !tensors(o, 2) || o.outputs.empty() || !owned(o.outputs[0])) return std::nullopt;
    const int reader = only_reader(o.outputs[0]);
    if (reader < 0 || !is_view(g_.nodes[static_cast<size_t>(reader)].op)) return std::nullopt;
    m.out_node = reader;
    m.out = g_.nodes[static_cast<size_t>(reader)].outputs.at(0);
    m.replaced = {bmm_node};
    // The probabilities: views and same-size expands of _softmax(scores, -1).
    int probs = strip(o.args[0].value, /*copies=*/false, &m.replaced);
    if (probs < 0) return std::nullopt;
    probs = through_cast(probs, &m.replaced);  // softmax(x, dtype=float32).to(x.dtype), as transformers writes it
    const AtenNode* sm = node_of(probs);
    if (!sm || sm->op != "aten::_softmax" || !owned(probs) || rank(probs) != 4) return std::nullopt;
    const AtenArg* dim = sm->arg("dim");
    const AtenArg* half = sm->arg("half_to_float");
    if (!dim || (dim->i != -1 && dim->i != 3) || (half && half->i != 0)) return std::nullopt;
    m.replaced.push_back(producer(probs));
    int scores = through_cast(sm->args[0].value, &m.replaced);
    // An optional causal mask, filled in or added.
    if (const AtenNode* mf = node_of(scores); mf && mf->op == "aten::masked_fill.Scalar" && owned(scores)) {
      const AtenArg* value = mf->arg("value");
      const std::optional<double> fill = value ? python_number(*value) : std::nullopt;
      if (!fill || !(*fill <= -65504.0)) return std::nullopt;
      if (mf->args.size() < 2 || mf->args[1].kind != AtenArg::kTensor) return std::nullopt;
      m.mask = mf->args[1].value;
      m.replaced.push_back(producer(scores));
      scores = mf->args[0].value;
    } else if (mf && mf->op == "aten::add.Tensor" && owned(scores) && tensors(*mf, 2)) {
      const std::optional<double> alpha = mf->arg("alpha") ? python_number(*mf->arg("alpha")) : 1.0;
      if (alpha != 1.0) return std::nullopt;
      m.bias = mf->args[1].value;
      m.replaced.push_back(producer(scores));
      scores = mf->args[0].value;
    }
    // An optional scale by a Python number.
    if (const AtenNode* s = node_of(scores); s && owned(scores) && (s->op == "aten::mul.Tensor" || s->op == "aten::div.Tensor")) {
      std::optional<double> c = python_number(s->args.at(1));
      if (!c || *c == 0 || !std::isfinite(*c)) return std::nullopt;
      m.scale = s->op == "aten::mul.Tensor" ? *c : 1.0 / *c;
      m.replaced.push_back(producer(scores));
      scores = s->args[0].value;
    }
    // The [B, H, L, S] view of the scores' bmm.
    const AtenNode* sv = node_of(scores);
    if (!sv || !is_view(sv->op) || !owned(scores) || rank(scores) != 4) return std::nullopt;
    m.replaced.push_back(producer(scores));
    const AtenNode* qk = node_of(sv->args[0].value);
    if (!qk || qk->op != "aten::bmm" || !tensors(*qk, 2) || !owned(sv->args[0].value)) return std::nullopt;
    m.replaced.push_back(producer(sv->args[0].value));
    m.q = strip(qk->args[0].value, true, nullptr);
    const int kt = strip(qk->args[1].value, true, nullptr);
    m.v = strip(o.args[1].value, true, nullptr);
    const AtenNode* t = node_of(kt);
    if (!t || rank(kt) != 4 || !last_two_swapped(*t)) return std::nullopt;
    m.k = t->args[0].value;
    if (rank(m.q) != 4 || rank(m.k) != 4 || rank(m.v) != 4 || rank(m.out) != 4) return std::nullopt;
    const auto &Q = sizes(m.q), &K = sizes(m.k), &V = sizes(m.v), &S = sizes(scores), &O = sizes(m.out);
    const bool shapes = Q[0] == K[0] && Q[0] == V[0] && Q[1] == K[1] && Q[1] == V[1] && Q[3] == K[3] && K[2] == V[2] &&
                        S == std::vector<int64_t>{Q[0], Q[1], Q[2], K[2]} && O == std::vector<int64_t>{Q[0], Q[1], Q[2], V[3]};
    const ir::DType dt = meta(m.q).dtype;
    const bool floating = dt == ir::DType::kFloat32 || dt == ir::DType::kFloat16 || dt == ir::DType::kBFloat16;
    if (!shapes || !floating || meta(m.k).dtype != dt || meta(m.v).dtype != dt || meta(m.out).dtype != dt || meta(scores).dtype != dt)
      return std::nullopt;
    return m;
  }

 private:
  const TensorMeta& meta(int v) const { return g_.values.at(static_cast<size_t>(v)).meta; }
  const std::vector<int64_t>& sizes(int v) const { return meta(v).sizes; }
  size_t rank(int v) const { return sizes(v).size(); }
  bool owned(int v) const { return uses_.at(static_cast<size_t>(v)) == 1; }
  int producer(int v) const {
    const AtenValue& val = g_.values.at(static_cast<size_t>(v));
    return val.kind == AtenValue::kNodeOutput ? val.index : -1;
  }
  const AtenNode* node_of(int v) const {
    const int p = producer(v);
    return p >= 0 ? &g_.nodes[static_cast<size_t>(p)] : nullptr;
  }
  static bool tensors(const AtenNode& n, size_t k) {
    if (n.args.size() < k) return false;
    for (size_t i = 0; i < k; ++i)
      if (n.args[i].kind != AtenArg::kTensor) return false;
    return true;
  }
  static bool is_view(const std::string& op) { return op == "aten::view" || op == "aten::_unsafe_view" || op == "aten::reshape"; }
  // The node reading `v` (its only reader), or -1.
  int only_reader(int v) const {
    for (size_t i = 0; i < g_.nodes.size(); ++i)
      for (const AtenArg& a : g_.nodes[i].args)
        if (a.kind == AtenArg::kTensor && a.value == v) return static_cast<int>(i);
    return -1;
  }
  // Back from `v` through views, same-size expands and (with `copies`) clones: the value they
  // start from. With `owned_nodes`, each value passed must have no other reader, and its node is recorded.
  int strip(int v, bool copies, std::vector<int>* owned_nodes) const {
    for (;;) {
      const AtenNode* n = node_of(v);
      if (!n || n->args.empty() || n->args[0].kind != AtenArg::kTensor) return v;
      const int in = n->args[0].value;
      const bool same_size = sizes(in) == sizes(v);
      const bool pass = is_view(n->op) || (n->op == "aten::expand" && same_size) || (copies && n->op == "aten::clone" && same_size);
      if (!pass) return v;
      if (is_view(n->op) && copies && rank(v) == 4) return v;  // a [B, H, ., .] tensor: q, k^T or v itself
      if (owned_nodes) {
        if (!owned(v)) return -1;
        owned_nodes->push_back(producer(v));
      }
      v = in;
    }
  }
  // `v`'s input where `v` is a dtype cast (_to_copy on the same device) read only by the
  // pattern (its node recorded), else `v`.
  int through_cast(int v, std::vector<int>* owned_nodes) const {
    const AtenNode* n = node_of(v);
    if (!n || n->op != "aten::_to_copy" || !owned(v) || n->args.empty() || n->args[0].kind != AtenArg::kTensor) return v;
    const int in = n->args[0].value;
    if (sizes(in) != sizes(v) || meta(in).cpu != meta(v).cpu) return v;
    owned_nodes->push_back(producer(v));
    return in;
  }
  bool last_two_swapped(const AtenNode& n) const {
    if (n.op == "aten::transpose.int") {
      const AtenArg *a = n.arg("dim0"), *b = n.arg("dim1");
      if (!a || !b) return false;
      auto d = [](int64_t x) { return x < 0 ? x + 4 : x; };
      return std::min(d(a->i), d(b->i)) == 2 && std::max(d(a->i), d(b->i)) == 3;
    }
    if (n.op == "aten::permute") {
      const AtenArg* dims = n.arg("dims");
      return dims && dims->ints == std::vector<int64_t>{0, 1, 3, 2};
    }
    return false;
  }
  // A Python number the graph holds as a wrapped 0-d tensor, or a Scalar argument.
  std::optional<double> python_number(const AtenArg& a) const {
    if (a.kind == AtenArg::kDouble) return a.d;
    if (a.kind == AtenArg::kInt) return static_cast<double>(a.i);
    const at::Tensor* t = a.kind == AtenArg::kTensor ? wrapped_number(tr_, a.value) : nullptr;
    if (!t) return std::nullopt;
    return t->item<double>();
  }

  const AtenGraph& g_;
  const TraceResult& tr_;
  std::vector<int> uses_;
};

at::ScalarType scalar_type(ir::DType t) {
  switch (t) {
    case ir::DType::kFloat16: return at::kHalf;
    case ir::DType::kBFloat16: return at::kBFloat16;
    default: return at::kFloat;
  }
}

at::Device device_of(int cuda_device) {
  return cuda_device >= 0 ? at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(cuda_device)) : at::Device(at::kCPU);
}

// The stand-ins' random numbers, drawn on the graph's device from a fixed seed: a copy of the
// device's default generator, so the program's own random stream is untouched. (Drawn on the
// CPU and copied, a decoder's key cache at every new length, 8 x 16 heads x 1k x 128, cost
// 0.2 s of each CUDA lowering: decode_kv's first calls over 32 lengths took 12 s.)
at::Generator stand_in_generator(int cuda_device) {
  constexpr uint64_t kSeed = 20261128;
  if (cuda_device < 0) return at::make_generator<at::CPUGeneratorImpl>(kSeed);
  at::Generator shared = at::globalContext().defaultGenerator(device_of(cuda_device));  // a handle to it
  at::Generator gen;
  {
    std::lock_guard<std::mutex> lock(shared.mutex());
    gen = shared.clone();
  }
  gen.set_current_seed(kSeed);
  return gen;
}

// A random stand-in with `m`'s sizes, strides and storage offset (SDPA picks its kernel, and
// views their strides, from the layout).
at::Tensor stand_in(const TensorMeta& m, int cuda_device, at::Generator& gen) {
  int64_t extent = m.storage_offset + 1;
  for (size_t d = 0; d < m.sizes.size(); ++d) extent += (m.sizes[d] - 1) * m.strides[d];
  const at::TensorOptions options = at::TensorOptions().device(device_of(cuda_device));
  at::Tensor t = at::empty({extent}, options.dtype(scalar_type(m.dtype))).as_strided(m.sizes, m.strides, m.storage_offset);
  t.copy_(at::randn(m.sizes, gen, options.dtype(at::kFloat)));
  return t;
}

// Whether SDPA's result matches the pattern's: the largest difference within a share of the
// largest magnitude (a wrong match, a swapped operand or another scale, is off by its whole size).
bool close(const at::Tensor& got, const at::Tensor& want) {
  const at::Tensor a = got.to(at::kFloat), b = want.to(at::kFloat);
  if (!at::isfinite(b).all().item<bool>()) return false;
  const double tol = want.scalar_type() == at::kFloat ? 1e-4 : 3e-2;
  const double scale = b.abs().max().item<double>();
  return (a - b).abs().max().item<double>() <= tol * std::max(scale, 1.0);
}

// The graph with `m`'s nodes gone, SDPA's traced nodes (`call`, whose inputs 0-2 are q, k, v)
// where the result's view was, and that view turned into a copy of SDPA's result in its layout.
void splice(TraceResult& tr, const Match& m, const TraceResult& call) {
  AtenGraph& g = tr.graph;
  const std::set<int> gone(m.replaced.begin(), m.replaced.end());
  std::unordered_map<int, int> map;  // call's value id -> g's
  for (size_t v = 0; v < call.graph.values.size(); ++v) {
    const AtenValue& cv = call.graph.values[v];
    if (cv.kind == AtenValue::kInput) {
      map[static_cast<int>(v)] = cv.index == 0 ? m.q : cv.index == 1 ? m.k : m.v;
    } else if (cv.kind == AtenValue::kConstant) {
      tr.constants.push_back(call.constants.at(static_cast<size_t>(cv.index)));
      map[static_cast<int>(v)] = g.add_value(AtenValue::kConstant, static_cast<int>(tr.constants.size()) - 1, cv.meta);
    } else {
      map[static_cast<int>(v)] = g.add_value(AtenValue::kNodeOutput, -1, cv.meta);
    }
  }
  std::vector<AtenNode> nodes;
  std::vector<std::vector<c10::IValue>> args;
  auto append = [&](AtenNode n, std::vector<c10::IValue> boxed) {
    for (int o : n.outputs)
      if (o >= 0) g.values.at(static_cast<size_t>(o)).index = static_cast<int>(nodes.size());
    nodes.push_back(std::move(n));
    args.push_back(std::move(boxed));
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (gone.count(static_cast<int>(i))) {
      for (int o : g.nodes[i].outputs)
        if (o >= 0) g.values.at(static_cast<size_t>(o)).index = -1;  // read by nothing now
      continue;
    }
    if (static_cast<int>(i) != m.out_node) {
      append(std::move(g.nodes[i]), std::move(tr.node_args[i]));
      continue;
    }
    for (size_t c = 0; c < call.graph.nodes.size(); ++c) {
      AtenNode n = call.graph.nodes[c];
      for (AtenArg& a : n.args) {
        if (a.kind == AtenArg::kTensor) a.value = map.at(a.value);
        for (int& x : a.values)
          if (x >= 0) x = map.at(x);
      }
      for (int& o : n.outputs)
        if (o >= 0) o = map.at(o);
      n.grad_fn = -1;
      append(std::move(n), call.node_args.at(c));
    }
    AtenNode copy;
    copy.op = "aten::clone";
    AtenArg self;
    self.kind = AtenArg::kTensor;
    self.value = map.at(call.graph.outputs.at(0));
    self.name = "self";
    AtenArg format;
    format.kind = AtenArg::kInt;
    format.i = 0;  // torch.contiguous_format
    format.name = "memory_format";
    copy.args = {self, format};
    copy.outputs = {m.out};
    append(std::move(copy), {c10::IValue(), c10::IValue(c10::MemoryFormat::Contiguous)});
  }
  g.nodes = std::move(nodes);
  tr.node_args = std::move(args);
}

// Removes nodes nothing reads (after the rewrite: the copies of q, k and v into the matmuls'
// layouts, the mask), keeping random operators and those that raise on their values.
void remove_unread(TraceResult& tr) {
  AtenGraph& g = tr.graph;
  for (bool changed = true; changed;) {
    changed = false;
    const std::vector<int> uses = g.use_counts();
    std::vector<AtenNode> nodes;
    std::vector<std::vector<c10::IValue>> args;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      AtenNode& n = g.nodes[i];
      // (A node without tensor outputs, an assertion, always stays.)
      const bool unread = std::any_of(n.outputs.begin(), n.outputs.end(), [](int o) { return o >= 0; }) &&
                          std::none_of(n.outputs.begin(), n.outputs.end(), [&](int o) { return o >= 0 && uses[static_cast<size_t>(o)] > 0; });
      if (unread && !n.nondeterministic && !ir::raises_on_values(g, n)) {
        for (int o : n.outputs)
          if (o >= 0) g.values.at(static_cast<size_t>(o)).index = -1;
        changed = true;
        continue;
      }
      for (int o : n.outputs)
        if (o >= 0) g.values.at(static_cast<size_t>(o)).index = static_cast<int>(nodes.size());
      nodes.push_back(std::move(n));
      args.push_back(std::move(tr.node_args[i]));
    }
    g.nodes = std::move(nodes);
    tr.node_args = std::move(args);
  }
}

// What decides the check's outcome: the mask's verdict, the scale, and the pattern's operators,
// arguments and layouts (a model's layers repeat one attention: it is checked once per graph).
std::string signature(const TraceResult& tr, const Match& m, bool causal) {
  const AtenGraph& g = tr.graph;
  char scale[64];
  std::snprintf(scale, sizeof scale, "%a", m.scale);
  std::string s = std::string(causal ? "causal" : "full") + " scale " + scale;
  for (int v : {m.q, m.k, m.v, m.out}) s += " " + g.values.at(static_cast<size_t>(v)).meta.to_string();
  for (int node : m.replaced) {
    const AtenNode& n = g.nodes.at(static_cast<size_t>(node));
    s += " | " + n.op;
    for (const AtenArg& a : n.args)
      s += " " + (a.kind == AtenArg::kTensor ? g.values.at(static_cast<size_t>(a.value)).meta.to_string() : a.to_string());
    for (int o : n.outputs)
      if (o >= 0) s += " -> " + g.values.at(static_cast<size_t>(o)).meta.to_string();
  }
  return s;
}

// SDPA's traced call per signature, or null where the check failed.
using Checked = std::map<std::string, std::shared_ptr<const TraceResult>>;

// SDPA's choice with cuDNN attention off while it lives (the flag is the process's, as
// torch.nn.attention.sdpa_kernel's is), put back as it was.
class NoCudnnAttention {
 public:
  explicit NoCudnnAttention(bool active) : active_(active), was_(at::globalContext().userEnabledCuDNNSDP()) {
    if (active_) at::globalContext().setSDPUseCuDNN(false);
  }
  ~NoCudnnAttention() {
    if (active_) at::globalContext().setSDPUseCuDNN(was_);
  }
  NoCudnnAttention(const NoCudnnAttention&) = delete;
  NoCudnnAttention& operator=(const NoCudnnAttention&) = delete;

 private:
  bool active_, was_;
};

// Tries the pattern ending at bmm node `i`; true where the graph changed.
bool fuse_at(TraceResult& trace, int i, int cuda_device, bool sizes_vary, Checked& checked) {
  std::optional<Match> m = Matcher(trace).at(i);
  if (!m) return false;
  const TensorMeta &Q = trace.graph.values.at(static_cast<size_t>(m->q)).meta, &K = trace.graph.values.at(static_cast<size_t>(m->k)).meta;
  const int64_t L = Q.sizes[2], S = K.sizes[2];
  // The check below computes the pattern's [B, H, L, S] scores once more: left as written above
  // 2^27 of them (8 x 12 heads at 4k positions), rather than risk the memory at compile time.
  if (Q.sizes[0] * Q.sizes[1] * L * S > (int64_t{1} << 27)) return false;
  try {
    ValueEvaluator ev(trace);
    bool causal = false;
    if (m->mask >= 0) {
      std::optional<at::Tensor> mask = ev.value(m->mask);
      if (!mask || !is_causal_exclusion(*mask, L, S)) return false;
      causal = true;
    }
    if (m->bias >= 0) {
      std::optional<at::Tensor> bias = ev.value(m->bias);
      if (!bias || !is_causal_bias(*bias, L, S)) return false;
      causal = true;
    }
    const std::string sig = signature(trace, *m, causal);
    if (auto known = checked.find(sig); known != checked.end()) {
      if (!known->second) return false;
      splice(trace, *m, *known->second);
      remove_unread(trace);
      return true;
    }
    std::shared_ptr<const TraceResult>& verdict = checked[sig];  // null until the check passes
    at::Generator gen = stand_in_generator(cuda_device);
    // One stand-in per distinct value (self-attention may read one tensor as two operands).
    const at::Tensor q = stand_in(Q, cuda_device, gen);
    const at::Tensor k = m->k == m->q ? q : stand_in(K, cuda_device, gen);
    const at::Tensor v = m->v == m->q ? q : m->v == m->k ? k : stand_in(trace.graph.values.at(static_cast<size_t>(m->v)).meta, cuda_device, gen);
    ev.seed(m->q, q);
    ev.seed(m->k, k);
    ev.seed(m->v, v);
    std::optional<at::Tensor> want = ev.value(m->out);
    if (!want) return false;
    const double scale = m->scale;
    NoCudnnAttention no_cudnn(sizes_vary && cuda_device >= 0);
    auto call = std::make_shared<TraceResult>(bridge::trace({q, k, v}, [&](const std::vector<at::Tensor>& in) {
      return std::vector<at::Tensor>{at::scaled_dot_product_attention(in[0], in[1], in[2], std::nullopt, 0.0, causal, scale)};
    }));
    if (call->outputs.size() != 1 || call->graph.outputs.size() != 1 || !call->graph.input_mutations.empty() ||
        call->graph.values.at(static_cast<size_t>(call->graph.outputs[0])).kind != AtenValue::kNodeOutput || !close(call->outputs[0], *want))
      return false;
    call->outputs.clear();  // the stand-ins' result: not needed again
    verdict = call;
    splice(trace, *m, *call);
  } catch (const std::exception&) {
    return false;  // the pattern stays as it was
  }
  remove_unread(trace);
  return true;
}

}  // namespace

int fuse_attention(TraceResult& trace, int cuda_device, bool sizes_vary) {
  Checked checked;
  int fused = 0;
  // One rewrite at a time, each renumbering the nodes: the search starts again after it.
  for (bool again = true; again;) {
    again = false;
    for (size_t i = 0; i < trace.graph.nodes.size() && !again; ++i)
      if (trace.graph.nodes[i].op == "aten::bmm" && fuse_at(trace, static_cast<int>(i), cuda_device, sizes_vary, checked)) again = true;
    fused += again;
  }
  return fused;
}

}  // namespace kiln::bridge
