"""Glue for kiln's autograd layer: a training graph's compiled forward and backward
(kiln._C.TrainingStages, built by csrc/autograd and csrc/torch_bridge/tracer.cpp) run as one
autograd node, as AOTAutograd's compiled function does for torch.compile."""
from __future__ import annotations

import torch


class _CompiledPair(torch.autograd.Function):
    @staticmethod
    def forward(ctx, stages, *inputs):
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
        ctx.stages = stages
        ctx.set_materialize_grads(False)  # backward tells an unused output (None) from a zero gradient
        ctx.save_for_backward(*saved, *outs[n + m:])
        ctx.out_meta = [(o.shape, o.dtype, o.device) for o, r in zip(fwd, stages.output_requires_grad) if r]
        ctx.mark_non_differentiable(*[o for o, r in zip(fwd, stages.output_requires_grad) if not r])
        return tuple(fwd)

    @staticmethod
    def backward(ctx, *grads):
        if torch.is_grad_enabled():  # backward(create_graph=True): the compiled backward is not differentiable
            raise RuntimeError("kiln: double backward (create_graph=True) through a graph kiln compiled for training is not "
                               "supported yet; compile with backend='eager' or run this part without kiln.compile")
        st = ctx.stages
        tangents = []
        given = []  # per tangent: whether autograd gave a gradient for that output
        metas = iter(ctx.out_meta)
        for g, needed in zip(grads, st.output_requires_grad):
            if not needed:
                continue
            shape, dtype, device = next(metas)
            given.append(g is not None)
            # The backward was traced with dense tangents: give it those.
            tangents.append(torch.zeros(shape, dtype=dtype, device=device) if g is None else g.contiguous())
        res = st.backward(list(ctx.saved_tensors) + tangents)
        out = [None] * st.num_inputs
        for g, i, reads in zip(res, st.grad_of, st.grad_tangents):
            # An input reached only from outputs the loss did not use gets no gradient, as in eager
            # (its .grad stays None rather than becoming zeros).
            if not any(given[j] for j in reads):
                continue
            out[i] = g
        return (None, *out)


def _same_storage(a, b):
    return a.device == b.device and a.dtype == b.dtype and \
        a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def run(stages, *inputs):
    outs = _CompiledPair.apply(stages, *inputs)
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
