// Attention biases that are causal masks, recognised and replaced by SDPA's `is_causal`.
//
// Code that builds its causal mask itself (transformers before 5.x whenever a compiler traces it,
// since it cannot tell there that no token is padded; hand-written `arange(L)[:, None] >=
// arange(S)` masks) hands SDPA a [.., L, S] additive bias of zeros and -inf (or a large negative
// value). The attention kernel then reads that bias for every score and computes the
// blocks above the diagonal only to discard them, and the mask itself is one more kernel: on an
// H200, Llama-1B's attention took 37 us per layer with its mask and 19.5 us with `is_causal`.
//
// A bias is replaced only where it is provably that mask at the traced sizes: it is computed
// from sizes alone, so it is evaluated here (value_evaluation.h) and compared with the causal
// mask (is_causal_bias; every row has its diagonal unmasked). The trace is made per size, so
// another size is checked again. Each reader of the bias must be a forward SDPA call without
// dropout; a bias also read elsewhere (saved for a backward) stays.
#pragma once

#include "torch_bridge/tracer.h"

namespace kiln::bridge {

// Rewrites `trace` in place: each recognised SDPA call gets `is_causal=True` and no bias (its
// boxed arguments too); the mask's nodes are left without readers. Returns how many calls changed.
int use_causal_attention(TraceResult& trace);

}  // namespace kiln::bridge
