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
        mutated = stages.mutated_inputs
        # The backward reads inputs as they were before this call wrote any of them.
        saved = [inputs[i].clone() if i in mutated else inputs[i] for i in stages.saved_primals]
        for i, new in zip(mutated, outs[n:n + m]):  # running statistics and the like
            inputs[i].copy_(new)
        ctx.stages = stages
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
        metas = iter(ctx.out_meta)
        for g, needed in zip(grads, st.output_requires_grad):
            if not needed:
                continue
            shape, dtype, device = next(metas)
            # The backward was traced with dense tangents: give it those.
            tangents.append(torch.zeros(shape, dtype=dtype, device=device) if g is None else g.contiguous())
        res = st.backward(list(ctx.saved_tensors) + tangents)
        out = [None] * st.num_inputs
        for g, i in zip(res, st.grad_of):
            out[i] = g
        return (None, *out)


def run(stages, *inputs):
    return _CompiledPair.apply(stages, *inputs)
