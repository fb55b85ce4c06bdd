// The lowering driver: values, realization, reductions, extern calls; see lowerer.h.
#include "lowering/lowerer.h"

#include <algorithm>
#include <set>
#include <stdexcept>

#include "schedule/placement.h"

namespace kiln::lowering {
using namespace ir;

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> st(sizes.size(), 1);
  for (int d = static_cast<int>(sizes.size()) - 2; d >= 0; --d) st[d] = st[d + 1] * std::max<int64_t>(sizes[d + 1], 1);
  return st;
}

// Row-major flatten over `to`, unflatten over `from`.
std::vector<Index> reshape_index(const std::vector<Index>& idx, const std::vector<int64_t>& to,
                                 const std::vector<int64_t>& from, const VarRanges& ranges) {
  Index flat = Index::of(0);
  auto st = contiguous_strides(to);
  for (size_t d = 0; d < to.size(); ++d)
    if (to[d] != 1) flat = add(flat, mul(idx[d], st[d]));
  auto fs = contiguous_strides(from);
  std::vector<Index> out(from.size());
  for (size_t d = 0; d < from.size(); ++d) {
    if (from[d] == 1) { out[d] = Index::of(0); continue; }
    Index q = floordiv(flat, fs[d], ranges);
    out[d] = d == 0 ? q : mod(q, from[d], ranges);
  }
  return out;
}

// Strides are usable for a kernel-written buffer when they describe a dense, non-overlapping
// layout (a permutation of a contiguous one).
static bool dense_layout(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  auto order = schedule::loop_order(sizes, strides);
  int64_t expected = 1;
  for (int i = static_cast<int>(order.size()) - 1; i >= 0; --i) {
    int d = order[i];
    if (sizes[d] == 1) continue;
    if (strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

Lowerer::Lowerer(const AtenGraph& g, LoweringOptions opts) : g_(g), opts_(opts) {}

// Whether a reduction's input expression reads along its innermost kept loop `col` (stride 1 in
// some load) and no load that varies along `col` is contiguous along its innermost reduced loop
// `inner` instead: a column reduction (a bias gradient), which the CPU code generator runs with the
// reduction outside and a block of adjacent outputs inside (codegen/cpp is_column_reduction) only
// in a kernel of its own.
static bool reads_columns(const ExprPtr& e, int col, int inner) {
  bool column = false, rows = false;
  std::function<void(const ExprPtr&)> walk = [&](const ExprPtr& x) {
    if (x->kind == Expr::kLoad) {
      column |= x->index.coefficient_of(col) == 1;
      rows |= (x->index.coefficient_of(inner) == 1 && x->index.coefficient_of(col) != 0) || !x->indirect.empty();
    }
    for (const auto& a : x->args) walk(a);
    for (const auto& i : x->indirect) walk(i.value);
  };
  walk(e);
  return column && !rows;
}

std::string Lowerer::node_label(int node) const {
  const AtenNode& n = g_.nodes[node];
  std::string s;
  for (size_t i = 0; i < n.outputs.size(); ++i)
    if (n.outputs[i] >= 0) s += (s.empty() ? "%" : ",%") + std::to_string(n.outputs[i]);
  return s + "=" + n.op;
}

int Lowerer::new_buffer(Buffer::Kind kind, const TensorMeta& m, int index) {
  Buffer b;
  b.kind = kind;
  b.index = index;
  b.dtype = m.dtype;
  b.sizes = m.sizes;
  b.strides = m.strides;
  if (kind == Buffer::kKernelOutput && !dense_layout(m.sizes, m.strides)) b.strides = contiguous_strides(m.sizes);
  b.name = "buf" + std::to_string(prog_.buffers.size());
  prog_.buffers.push_back(b);
  producer_step_.push_back(-1);
  return static_cast<int>(prog_.buffers.size()) - 1;
}

Loader Lowerer::broadcast(int value, const std::vector<int64_t>& sizes) {
  const auto& src = meta(value).sizes;
  const int off = static_cast<int>(sizes.size()) - static_cast<int>(src.size());
  Lowerer* self = this;
  return [self, value, off, src](const std::vector<Index>& idx, LoadCtx& ctx) {
    std::vector<Index> j(src.size());
    for (size_t d = 0; d < src.size(); ++d) j[d] = src[d] == 1 ? Index::of(0) : idx[d + off];
    return self->value(value).loader(j, ctx);
  };
}

Loader Lowerer::arg_loader(const AtenArg& a, const std::vector<int64_t>& sizes, DType dtype) {
  if (a.kind == AtenArg::kTensor) {
    Loader l = broadcast(a.value, sizes);
    return [l, dtype](const std::vector<Index>& idx, LoadCtx& ctx) { return cast(l(idx, ctx), dtype); };
  }
  double v = a.kind == AtenArg::kDouble ? a.d : static_cast<double>(a.i);
  return [v, dtype](const std::vector<Index>&, LoadCtx&) { return constant(v, dtype); };
}

// How many distinct buffers a value's inlined expression loads: each is a stream of memory every
// reader pays for again (a residual stream inlined into each layer's norm re-reads every earlier
// layer's output).
int Lowerer::buffers_read(int value) {
  const auto& sizes = meta(value).sizes;
  LoadCtx ctx;
  ctx.ranges = sizes;
  std::vector<Index> idx;
  for (size_t d = 0; d < sizes.size(); ++d) idx.push_back(Index::var(static_cast<int>(d)));
  std::set<int> buffers;
  loaded_buffers(values_.at(value).loader(idx, ctx), buffers);
  return static_cast<int>(buffers.size());
}

void Lowerer::define(int out, Loader loader, int cost) {
  TensorValue& v = values_.at(out);
  const int node = node_;
  v.loader = [node, out, loader = std::move(loader)](const std::vector<Index>& idx, LoadCtx& ctx) {
    ctx.nodes.insert(node);
    ctx.values.insert(out);
    return loader(idx, ctx);
  };
  v.cost = cost;
  v.buffer = -1;
  v.realize = nullptr;
}

void Lowerer::note_fused(int kernel, const LoadCtx& ctx, bool current_node) {
  if (kernel_nodes_.size() <= static_cast<size_t>(kernel)) kernel_nodes_.resize(kernel + 1);
  kernel_nodes_[kernel].insert(ctx.nodes.begin(), ctx.nodes.end());
  if (current_node) kernel_nodes_[kernel].insert(node_);
}

void Lowerer::store_region(int buffer, const std::vector<int64_t> sizes, const std::vector<int64_t> strides,
                           int64_t offset, const Loader loader, bool computes_current_node) {
  // Loops over the dims of size > 1 only (a keepdim reduction's result then fits the
  // reduction's own kernel), outermost the largest stride.
  std::vector<int> order;
  std::vector<int64_t> ordered;
  for (int d : schedule::loop_order(sizes, strides))
    if (sizes[d] != 1) order.push_back(d), ordered.push_back(sizes[d]);
  auto& pl = *placement_;
  int kernel = pl.place(ordered, 1, [&](int k, int num_outer) {
    if (column_kernels_.count(k) && num_outer < static_cast<int>(ordered.size())) return false;  // see reads_columns
    LoadCtx ctx;
    ctx.kernel = k;
    ctx.num_outer = num_outer;
    ctx.ranges = ordered;
    std::vector<Index> idx(sizes.size(), Index::of(0));
    for (size_t j = 0; j < order.size(); ++j) idx[order[j]] = Index::var(static_cast<int>(j));
    ExprPtr e = loader(idx, ctx);
    if (!ctx.ok) return false;
    Stage s;
    s.kind = Stage::kPointwise;
    s.inner_sizes.assign(ordered.begin() + num_outer, ordered.end());
    s.value = cast(e, prog_.buffers[buffer].dtype);
    s.out_buffer = buffer;
    Index out = Index::of(offset);
    for (size_t d = 0; d < sizes.size(); ++d)
      if (sizes[d] != 1) out = add(out, mul(idx[d], strides[d]));
    s.out_index = out;
    prog_.kernels[k].stages.push_back(std::move(s));
    note_fused(k, ctx, computes_current_node);
    return true;
  }, false);
  producer_step_[buffer] = std::max(producer_step_[buffer], pl.step_of(kernel));
}

int Lowerer::realize_pointwise(int value) {
  const TensorMeta& m = meta(value);
  int buf = new_buffer(Buffer::kKernelOutput, m);
  // Copies: lowering may add buffers (and move this vector) while the stage is built.
  const std::vector<int64_t> sizes = prog_.buffers[buf].sizes, strides = prog_.buffers[buf].strides;
  Loader loader = values_[value].loader;
  store_region(buf, sizes, strides, 0, loader, false);
  return buf;
}

// A value that a reduction inlines, that loads two or more buffers and that other nodes read too
// (a transformer's residual stream, x + attention(x), read by the next layer norm and by the next
// residual add): left inlined, each later reader would load all its streams again, and the
// residual chain grows layer by layer (every layer norm of a GPT block re-reading up to six
// earlier outputs); realized in a kernel of its own, it costs a launch. Instead the reduction's
// kernel also stores it (a pointwise stage over the same rows, its loads shared through the row
// cache), as torch.compile's fused add + layer norm does. Readers in that kernel or before it
// keep computing it inline; readers in later kernels load the stored value. CUDA only: on the CPU
// (the bench's nanogpt, hf_gpt2, hf_llama, train_nanogpt) it measured no faster, the re-read rows
// being in cache, though every test passes with it on there too.
void Lowerer::store_beside(const std::set<int>& inlined, int kernel) {
  if (!opts_.cuda || !opts_.fuse || !opts_.store_beside_reductions || column_kernels_.count(kernel)) return;
  const std::vector<int64_t>& outer = prog_.kernels[kernel].outer_sizes;
  for (int u : inlined) {
    TensorValue& tv = values_[u];
    if (tv.buffer >= 0 || !tv.loader || tv.realize || readers_[u] < 2 || buffers_read(u) < 2) continue;
    // Its stage must land in this kernel: the rows are its outermost loops.
    const TensorMeta& m = meta(u);
    const std::vector<int64_t> strides = dense_layout(m.sizes, m.strides) ? m.strides : contiguous_strides(m.sizes);  // new_buffer's
    std::vector<int64_t> ordered;
    for (int d : schedule::loop_order(m.sizes, strides))
      if (m.sizes[d] != 1) ordered.push_back(m.sizes[d]);
    if (ordered.size() <= outer.size() || !std::equal(outer.begin(), outer.end(), ordered.begin())) continue;
    Loader inline_loader = tv.loader;
    const int cost = tv.cost;
    const bool transcendental = tv.transcendental;
    const int buf = realize_pointwise(u);
    beside_buffers_.push_back(buf);
    set_buffer_loader(u, buf);
    values_[u].loader = [this, inline_loader, buf](const std::vector<Index>& idx, LoadCtx& ctx) {
      if (ctx.kernel >= 0 && placement_->step_of(ctx.kernel) <= producer_step_[buf]) return inline_loader(idx, ctx);
      return buffer_load(buf, idx, ctx);
    };
    values_[u].cost = cost;
    values_[u].transcendental = transcendental;
  }
}

// A stored-beside value whose other readers all landed in its kernel (computing it inline) was
// stored for nothing: its stage goes.
void Lowerer::drop_unread_beside_stores() {
  if (beside_buffers_.empty()) return;
  std::set<int> read(prog_.outputs.begin(), prog_.outputs.end());
  for (auto [input, b] : prog_.input_mutations) read.insert(b);
  for (const Kernel& k : prog_.kernels)
    for (const Stage& st : k.stages) loaded_buffers(st.value, read);
  for (const Step& st : prog_.steps) read.insert(st.args.begin(), st.args.end());
  for (int buf : beside_buffers_) {
    if (read.count(buf)) continue;
    for (Kernel& k : prog_.kernels)
      k.stages.erase(std::remove_if(k.stages.begin(), k.stages.end(),
                                    [&](const Stage& st) { return st.kind == Stage::kPointwise && st.out_buffer == buf; }),
                     k.stages.end());
  }
}

int Lowerer::ensure_buffer(int value) {
  TensorValue& v = values_.at(value);
  if (v.buffer >= 0) return v.buffer;
  // A copy: realizing may redefine the value (an extern call sets its buffer).
  std::function<int()> realize = v.realize;
  int buf = realize ? realize() : realize_pointwise(value);
  set_buffer_loader(value, buf);
  return buf;
}

// A load of kernel-written or input buffer `buf` with its strides; only valid in kernels that run
// after its writer.
ExprPtr Lowerer::buffer_load(int buf, const std::vector<Index>& idx, LoadCtx& ctx) const {
  const int ps = producer_step_[buf];
  if (ps >= 0 && ctx.kernel >= 0 && ps >= placement_->step_of(ctx.kernel)) ctx.ok = false;
  const Buffer& b = prog_.buffers[buf];
  return load(buf, b.dtype, b.element_index(idx));
}

void Lowerer::set_buffer_loader(int value, int buf) {
  TensorValue& w = values_.at(value);
  w.buffer = buf;
  w.loader = [this, buf](const std::vector<Index>& idx, LoadCtx& ctx) { return buffer_load(buf, idx, ctx); };
  w.cost = 1;
  w.transcendental = false;  // its readers load it
}

void Lowerer::reduction(ReduceOp op, Loader input, const std::vector<int64_t>& in_sizes,
                        std::vector<int64_t> dims, DType acc, const std::vector<ReductionOut>& outs,
                        int keep_elements) {
  std::sort(dims.begin(), dims.end());
  dims.erase(std::unique(dims.begin(), dims.end()), dims.end());
  // Outer loops over the kept dims of size > 1 (so epilogues, whose loops skip size-1 dims too,
  // land in the same kernel); inner loops over the reduced dims.
  std::vector<int> kept;
  for (int d = 0; d < static_cast<int>(in_sizes.size()); ++d)
    if (!std::binary_search(dims.begin(), dims.end(), d) && in_sizes[d] != 1) kept.push_back(d);
  std::vector<int64_t> loop_sizes;
  for (int d : kept) loop_sizes.push_back(in_sizes[d]);
  for (int64_t d : dims) loop_sizes.push_back(in_sizes[d]);
  const int num_outer = static_cast<int>(kept.size());
  auto& pl = *placement_;
  int stage_index = -1, local = -1;
  std::set<int> inlined;
  int kernel = pl.place(loop_sizes, static_cast<int>(dims.size()), [&](int k, int n_outer) {
    if (n_outer != num_outer) return false;
    LoadCtx ctx;
    ctx.kernel = k;
    ctx.num_outer = num_outer;
    ctx.ranges = loop_sizes;
    std::vector<Index> idx(in_sizes.size(), Index::of(0));
    for (int j = 0; j < num_outer; ++j) idx[kept[j]] = Index::var(j);
    for (size_t j = 0; j < dims.size(); ++j) idx[dims[j]] = Index::var(num_outer + static_cast<int>(j));
    ExprPtr e = input(idx, ctx);
    if (!ctx.ok) return false;
    Kernel& K = prog_.kernels[k];
    // A column reduction opens a kernel of its own, and nothing with loops of its own joins it.
    const bool column = !opts_.cuda && num_outer > 0 && loop_sizes[num_outer - 1] >= 8 && reads_columns(e, num_outer - 1, static_cast<int>(loop_sizes.size()) - 1);
    if (column_kernels_.count(k) || (column && !K.stages.empty())) return false;
    if (column) column_kernels_.insert(k);
    Stage s;
    s.kind = Stage::kReduction;
    s.reduce = op;
    s.inner_sizes.assign(loop_sizes.begin() + num_outer, loop_sizes.end());
    s.value = cast(e, acc);
    s.acc_dtype = acc;
    s.local = K.num_locals++;
    int parts = info(op).parts;
    s.store_buffers.assign(parts, -1);
    s.store_index.assign(parts, Index::of(0));
    if (keep_elements >= 0) {
      s.out_buffer = keep_elements;
      s.out_index = prog_.buffers[keep_elements].element_index(idx);
    }
    local = s.local;
    K.stages.push_back(std::move(s));
    stage_index = static_cast<int>(K.stages.size()) - 1;
    note_fused(k, ctx, true);  // the reduction node itself
    inlined = std::move(ctx.values);
    return true;
  }, true);
  if (keep_elements >= 0) producer_step_[keep_elements] = std::max(producer_step_[keep_elements], pl.step_of(kernel));
  store_beside(inlined, kernel);

  for (const ReductionOut& o : outs) {
    const TensorMeta& m = meta(o.value);
    // For each output dim, its position among the outer loops (-1: a reduced or size-1 dim).
    // Output dims are the input's (keepdim) or the input's non-reduced dims in order.
    std::vector<int> out_kept(m.sizes.size(), -1);
    std::vector<int> input_dim_of_out;
    for (int d = 0; d < static_cast<int>(in_sizes.size()); ++d)
      if (m.sizes.size() == in_sizes.size() || !std::binary_search(dims.begin(), dims.end(), static_cast<int64_t>(d)))
        input_dim_of_out.push_back(d);
    if (input_dim_of_out.size() == m.sizes.size())
      for (size_t d = 0; d < m.sizes.size(); ++d) {
        auto it = std::find(kept.begin(), kept.end(), input_dim_of_out[d]);
        if (it != kept.end()) out_kept[d] = static_cast<int>(it - kept.begin());
      }
    auto finish = o.finish;
    int part = o.part, value_id = o.value;
    Lowerer* self = this;
    DType out_dtype = m.dtype;
    values_[value_id].cost = 2;
    values_[value_id].buffer = -1;
    values_[value_id].loader = [=, &pl](const std::vector<Index>& idx, LoadCtx& ctx) -> ExprPtr {
      bool same_row = ctx.kernel == kernel;
      for (size_t d = 0; d < idx.size() && same_row; ++d) {
        if (out_kept[d] < 0) continue;
        if (idx[d].as_var() != out_kept[d]) same_row = false;
      }
      if (same_row) {
        auto e = std::make_shared<Expr>();
        e->kind = Expr::kLocal;
        e->dtype = part == 1 && (op == ReduceOp::kArgMax || op == ReduceOp::kArgMin) ? DType::kInt64 : acc;
        e->local = local;
        e->local_part = part;
        return cast(finish ? finish(e, ctx) : e, out_dtype);
      }
      // Read from the stored result: make the stage store this part.
      if (self->prog_.kernels[kernel].stages[stage_index].store_buffers[part] < 0) {
        // Stored raw (before `finish`), in the accumulation type, over the kept dims.
        TensorMeta raw;
        raw.dtype = part == 1 && (op == ReduceOp::kArgMax || op == ReduceOp::kArgMin) ? DType::kInt64 : acc;
        for (int d : kept) raw.sizes.push_back(in_sizes[d]);
        raw.strides = contiguous_strides(raw.sizes);
        int nb = self->new_buffer(Buffer::kKernelOutput, raw);
        self->producer_step_[nb] = pl.step_of(kernel);
        Stage& st = self->prog_.kernels[kernel].stages[stage_index];
        st.store_buffers[part] = nb;
        Index si = Index::of(0);
        for (int j = 0; j < num_outer; ++j) si = add(si, mul(Index::var(j), raw.strides[j]));
        st.store_index[part] = si;
      }
      Stage& st3 = self->prog_.kernels[kernel].stages[stage_index];
      int nb = st3.store_buffers[part];
      if (ctx.kernel >= 0 && self->producer_step_[nb] >= pl.step_of(ctx.kernel)) ctx.ok = false;
      const Buffer& bb = self->prog_.buffers[nb];
      std::vector<Index> kidx;
      for (size_t d = 0; d < idx.size(); ++d)
        if (out_kept[d] >= 0) kidx.push_back(idx[d]);
      ExprPtr e = load(nb, bb.dtype, bb.element_index(kidx));
      return cast(finish ? finish(e, ctx) : e, out_dtype);
    };
  }
}

ExprPtr Lowerer::indirect_load(int value, std::vector<Index> idx, int dim, ExprPtr position, LoadCtx& ctx) {
  const int buf = values_.at(value).buffer;  // realized by the rule that reads it indirectly
  idx[dim] = Index::of(0);
  // The buffer itself: a value stored beside a reduction (store_beside) has a loader that computes
  // it inline in its writer's kernel, which an indirect read cannot take (its stage then goes to a
  // later kernel).
  auto e = std::make_shared<Expr>(*buffer_load(buf, idx, ctx));
  e->indirect.push_back({cast(position, DType::kInt64), prog_.buffers[buf].strides[dim], meta(value).sizes[dim]});
  return e;
}

ExprPtr Lowerer::load_written(int buffer, const std::vector<Index>& idx, LoadCtx& ctx) {
  if (ctx.kernel >= 0 && producer_step_[buffer] > placement_->step_of(ctx.kernel)) ctx.ok = false;
  const Buffer& b = prog_.buffers[buffer];
  return load(buffer, b.dtype, b.element_index(idx));
}

void Lowerer::extern_call(int node) {
  const AtenNode& n = g_.nodes[node];
  Step s;
  s.kind = Step::kExtern;
  s.node = node;
  s.op = n.op;
  for (const AtenArg& a : n.args) {
    if (a.kind == AtenArg::kTensor) s.args.push_back(ensure_buffer(a.value));
    if (a.kind == AtenArg::kTensorList)
      for (int v : a.values) s.args.push_back(v >= 0 ? ensure_buffer(v) : -1);
  }
  prog_.steps.push_back(s);
  const int step = static_cast<int>(prog_.steps.size()) - 1;
  for (int v : n.outputs) {
    int buf = -1;
    if (v >= 0) {
      buf = new_buffer(Buffer::kExternOutput, meta(v));
      prog_.buffers[buf].strides = meta(v).strides;  // exactly what ATen returns
      producer_step_[buf] = step;
      values_[v].buffer = -1;
      values_[v].realize = [buf] { return buf; };
      values_[v].buffer = buf;
      set_buffer_loader(v, buf);
    }
    prog_.steps[step].outputs.push_back(buf);
  }
}

bool Lowerer::lower_node(int node) {
  const AtenNode& n = g_.nodes[node];
  // Empty tensors go to ATen: a loop over nothing has no work to fuse, and index algebra over a
  // zero extent would divide by it.
  // An empty input of cat adds nothing to its output (a KV cache's first update is
  // cat([tensor([]), k])): only its dtype and device matter.
  const bool cat = n.op == "aten::cat" || n.op == "aten::stack";
  auto bad = [&](int v, bool may_be_empty = false) {
    if (v < 0) return false;
    const TensorMeta& m = meta(v);
    // The CPU code generator has no fp16 arithmetic; CUDA kernels compute it in float.
    return !is_supported(m.dtype) || (m.dtype == DType::kFloat16 && !opts_.cuda) || m.cpu == opts_.cuda || (m.numel() == 0 && !may_be_empty);
  };
  // (Inference batch norm's saved statistics are empty by definition: its rule fills them.)
  const bool bn = is_inference_batch_norm(n);
  for (size_t o = 0; o < n.outputs.size(); ++o)
    if (!(bn && o > 0 && n.outputs[o] >= 0 && meta(n.outputs[o]).numel() == 0) && bad(n.outputs[o])) return false;
  for (const AtenArg& a : n.args) {
    if (a.kind == AtenArg::kTensor && bad(a.value)) return false;
    for (int v : a.values)
      if (bad(v, cat)) return false;
  }
  if (n.nondeterministic) return false;
  return lower_view(*this, n) || lower_cat(*this, n) || lower_indexing(*this, n) || lower_pooling(*this, n) || lower_pointwise(*this, n) || lower_reduction(*this, n);
}

Program Lowerer::run() {
  values_.assign(g_.values.size(), TensorValue{});
  uses_ = g_.use_counts();
  readers_.assign(g_.values.size(), 0);
  for (const AtenNode& n : g_.nodes) {
    std::set<int> read;
    for (const AtenArg& a : n.args) {
      if (a.kind == AtenArg::kTensor && a.value >= 0) read.insert(a.value);
      for (int v : a.values)
        if (v >= 0) read.insert(v);
    }
    for (int v : read) ++readers_[v];
  }
  for (int v : std::set<int>(g_.outputs.begin(), g_.outputs.end())) ++readers_[v];
  broadcast_read_.assign(g_.values.size(), false);
  for (const AtenNode& n : g_.nodes) {
    if (n.outputs.empty() || n.outputs[0] < 0) continue;
    const int64_t out_numel = g_.values[n.outputs[0]].meta.numel();
    for (const AtenArg& a : n.args)
      if (a.kind == AtenArg::kTensor && a.value >= 0 && out_numel > g_.values[a.value].meta.numel()) broadcast_read_[a.value] = true;
  }
  placement_ = std::make_unique<schedule::Placement>(prog_);
  placement_->fuse = opts_.fuse;
  for (size_t v = 0; v < g_.values.size(); ++v) {
    const AtenValue& av = g_.values[v];
    values_[v].meta = av.meta;
    if (av.kind == AtenValue::kInput || av.kind == AtenValue::kConstant) {
      int buf = new_buffer(av.kind == AtenValue::kInput ? Buffer::kInput : Buffer::kConstant, av.meta, av.index);
      prog_.buffers[buf].strides = av.meta.strides;
      values_[v].realize = [buf] { return buf; };
      ensure_buffer(static_cast<int>(v));
    }
  }
  // Values some graph output or input write-back depends on: the others are computed by nothing.
  std::vector<bool> live(g_.values.size(), false);
  for (int v : g_.outputs) live[v] = true;
  for (auto [input, value] : g_.input_mutations) live[value] = true;
  for (size_t i = g_.nodes.size(); i-- > 0;) {
    const ir::AtenNode& n = g_.nodes[i];
    if (!std::any_of(n.outputs.begin(), n.outputs.end(), [&](int v) { return v >= 0 && live[v]; })) continue;
    for (const ir::AtenArg& a : n.args) {
      if (a.kind == ir::AtenArg::kTensor && a.value >= 0) live[a.value] = true;
      for (int v : a.values)
        if (v >= 0) live[v] = true;
    }
  }
  for (size_t i = 0; i < g_.nodes.size(); ++i) {
    node_ = static_cast<int>(i);
    if (opts_.extern_only || !lower_node(node_)) extern_call(node_);
    // An integer division or an indexing whose result no output depends on still runs: eager
    // raises on a zero divisor or an index out of range (read only by an unused sign(), fuzz seed
    // 21498, it was inlined into nothing).
    if (ir::raises_on_values(g_, g_.nodes[i]))
      for (int v : g_.nodes[i].outputs)
        if (v >= 0 && !live[v] && values_[v].buffer < 0 && values_[v].loader) ensure_buffer(v);
    // Values read more than once and expensive to recompute are realized right away, and so are
    // transcendental values a reader broadcasts (RoPE's cos and sin, read once per head and
    // batch row: inlined, each would be computed again for every one of them).
    // Without fusion every computed value (views aside) gets its own buffer and kernel.
    for (int v : g_.nodes[i].outputs)
      if (v >= 0 && values_[v].buffer < 0 && values_[v].loader && uses_[v] > 0 &&
          (opts_.fuse ? (uses_[v] > 1 && values_[v].cost > opts_.max_inline_cost) || values_[v].cost > opts_.max_expression_cost ||
                            (values_[v].transcendental && broadcast_read_[v]) ||
                            (uses_[v] > 1 && values_[v].cost > opts_.max_inline_reads && buffers_read(v) > opts_.max_inline_reads)
                      : !values_[v].realize))
        ensure_buffer(v);
  }
  for (int v : g_.outputs) {
    int buf = ensure_buffer(v);
    // Graph outputs keep eager's layout: a kernel-written value in another layout is copied.
    prog_.outputs.push_back(buf);
  }
  for (auto [input, v] : g_.input_mutations) prog_.input_mutations.push_back({input, ensure_buffer(v)});
  drop_unread_beside_stores();
  kernel_nodes_.resize(prog_.kernels.size());
  for (size_t k = 0; k < prog_.kernels.size(); ++k)
    for (int node : kernel_nodes_[k]) prog_.kernels[k].fused.push_back(node_label(node));
  return std::move(prog_);
}

}  // namespace kiln::lowering
