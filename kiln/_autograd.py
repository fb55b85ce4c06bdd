"""Glue for kiln's autograd layer: a training graph's compiled forward and backward
(kiln._C.TrainingStages, built by csrc/autograd and csrc/torch_bridge/tracer.cpp) run as one
autograd node, as AOTAutograd's compiled function does for torch.compile."""
from __future__ import annotations

import torch

from kiln import _C


class _Forward:
    """One call's compiled forward: the outputs, the saved tensors (as _C._saved_aliases gives them)
    and each tangent's (shape, dtype, device), shared by the call's autograd node(s)."""
    __slots__ = ("outputs", "aliases", "witnesses", "versions", "tangent_meta")

    def __init__(self, stages, inputs):
        outs = stages.forward(list(inputs))
        n, m = stages.num_outputs, len(stages.mutated_inputs)
        fwd = outs[:n]
        for k, o in enumerate(fwd):  # a view of a buffer of the node's own: a tensor of its own (see run())
            if o._is_view() and not any(_same_storage(o, b) for b in list(inputs) + [u for u in fwd if not u._is_view()]
                                        if isinstance(b, torch.Tensor)):
                fwd[k] = o.detach()
        mutated = stages.mutated_inputs
        # The backward reads inputs as they were before this call wrote any of them.
        saved = [inputs[i].clone() if i in mutated else inputs[i] for i in stages.saved_primals]
        for i, new in zip(mutated, outs[n:n + m]):  # running statistics and the like
            inputs[i].copy_(new)
        # Saved through aliases with version counters of their own, checked in backward only where
        # that call's backward reads them (see _check_versions).
        self.aliases, self.witnesses, self.versions = _C._saved_aliases(saved + outs[n + m:])
        self.outputs = fwd
        self.tangent_meta = [(o.shape, o.dtype, o.device) for o, r in zip(fwd, stages.output_requires_grad) if r]


def _backward(ctx, grads, outputs):
    """The gradients of the graph's inputs (a list over all of them, None where none) from the
    gradients `grads` of forward outputs `outputs` (the other outputs got none)."""
    if torch.is_grad_enabled():  # backward(create_graph=True): the compiled backward is not differentiable
        raise RuntimeError("kiln: double backward (create_graph=True) through a graph kiln compiled for training is not "
                           "supported yet; compile with backend='eager' or run this part without kiln.compile")
    st = ctx.stages
    tangent_of = st.tangent_of_output
    given = [False] * len(ctx.tangent_meta)  # per tangent: whether autograd gave a gradient for that output
    tangents = [None] * len(ctx.tangent_meta)
    for g, j in zip(grads, outputs):
        t = tangent_of[j]
        if t >= 0 and g is not None:
            given[t] = True
            tangents[t] = g.contiguous()
    for t, (shape, dtype, device) in enumerate(ctx.tangent_meta):
        if tangents[t] is None:  # a placeholder the pruned backward does not read
            tangents[t] = torch.empty(shape, dtype=dtype, device=device)
    saved = list(ctx.saved_tensors)
    if all(given):
        _check_versions(ctx, range(len(saved)))
        res = st.backward(saved + tangents)
    else:
        # Outputs the loss does not use: their formulas must not run (0 * inf in one of them
        # would put NaN into a gradient eager computes finite): a backward without them.
        _check_versions(ctx, st.saved_read(given))
        res = st.backward_given(given, saved + tangents)
    out = [None] * st.num_inputs
    for g, i, reads in zip(res, st.grad_of, st.grad_tangents):
        # An input reached only from outputs the loss did not use gets no gradient, as in eager
        # (its .grad stays None rather than becoming zeros).
        if any(given[j] for j in reads):
            out[i] = g
    return out


def _keep(ctx, stages, fw):
    ctx.stages = stages
    ctx.set_materialize_grads(False)  # backward tells an unused output (None) from a zero gradient
    ctx.save_for_backward(*fw.aliases)
    ctx.witnesses, ctx.versions, ctx.tangent_meta = fw.witnesses, fw.versions, fw.tangent_meta


class _CompiledPair(torch.autograd.Function):
    """The call's one autograd node: every output, an edge to every input with a gradient."""
    @staticmethod
    def forward(ctx, stages, *inputs):
        fw = _Forward(stages, inputs)
        _keep(ctx, stages, fw)
        ctx.mark_non_differentiable(*[o for o, r in zip(fw.outputs, stages.output_requires_grad) if not r])
        return tuple(fw.outputs)

    @staticmethod
    def backward(ctx, *grads):
        return (None, *_backward(ctx, grads, range(len(grads))))


class _Group(torch.autograd.Function):
    """One group of a call's outputs (TrainingStages.component_outputs) as an autograd node with
    edges to the inputs that group reaches; the forward ran already (fw)."""
    @staticmethod
    def forward(ctx, stages, fw, k, *inputs):
        _keep(ctx, stages, fw)
        ctx.group = k
        return tuple(fw.outputs[j] for j in stages.component_outputs[k])

    @staticmethod
    def backward(ctx, *grads):
        st = ctx.stages
        out = _backward(ctx, grads, st.component_outputs[ctx.group])
        return (None, None, None, *[out[st.grad_of[p]] for p in st.component_grads[ctx.group]])


def _check_versions(ctx, indices):
    """Autograd's check that a saved tensor was not written in place since the forward, for the
    saved tensors this backward reads (eager checks those of the formulas it runs). The witnesses
    go with this backward (a second one, under retain_graph=True, is not checked)."""
    w, v = ctx.witnesses, ctx.versions
    if w is None:
        return
    ctx.witnesses = None
    for i in indices:
        if w[i]._version != v[i]:
            t = w[i]
            raise RuntimeError(
                "one of the variables needed for gradient computation has been modified by an inplace operation: "
                f"[{t.type()} {list(t.shape)}], which is saved by a graph kiln compiled, is at version {t._version}; "
                f"expected version {v[i]} instead. Hint: the tensor was written in place after the compiled call "
                "and before backward")


def _run_groups(stages, inputs):
    # Outputs that reach disjoint sets of inputs: eager's backward from one set never visits the
    # others' inputs (whose history may have no derivative, or saved tensors written since).
    with torch.no_grad():
        fw = _Forward(stages, inputs)
    outs = list(fw.outputs)
    for k, js in enumerate(stages.component_outputs):
        mine = [inputs[stages.grad_of[p]] for p in stages.component_grads[k]]
        for j, o in zip(js, _Group.apply(stages, fw, k, *mine)):
            outs[j] = o
    return tuple(outs)


def _same_storage(a, b):
    return a.device == b.device and a.dtype == b.dtype and \
        a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def run(stages, *inputs):
    # An input no differentiable output reaches (unused by the graph, or used only where no
    # gradient flows) gets no edge from the node: eager's backward never visits its autograd
    # history, whose nodes may hold saved tensors modified since or have no derivative.
    unreached = stages.unreached_inputs
    if unreached:
        inputs = list(inputs)
        for i in unreached:
            if inputs[i].requires_grad:
                inputs[i] = inputs[i].detach()
    if len(stages.component_outputs) <= 1:
        outs = _CompiledPair.apply(stages, *inputs)
    else:
        outs = _run_groups(stages, inputs)
    if not any(o._is_view() for o in outs):
        return outs
    # An output that is a view (of an input, or of another output, as eager's `t[0]` or
    # `y.narrow(...)`) would be a view created inside a custom Function: autograd forbids writing
    # to it in place, where eager allows it. Such outputs are made again outside the node, as
    # views of the input or output whose storage they share, so autograd sees eager's view.
    outs = list(outs)
    for k, o in enumerate(outs):
        if not o._is_view():
            continue
        base = next((b for b in outs if not b._is_view() and _same_storage(o, b)), None)
        if base is None:
            base = next((b for b in inputs if isinstance(b, torch.Tensor) and _same_storage(o, b)), None)
        if base is not None:
            outs[k] = base.as_strided(o.size(), o.stride(), o.storage_offset())
    return tuple(outs)
