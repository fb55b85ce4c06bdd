// Attention written out by hand, `softmax(q @ k.transpose(-2, -1) * scale [masked causally]) @ v`
// (NanoGPT, minGPT and many research models), becomes one call of the attention kernel PyTorch's
// SDPA picks for it (flash attention on the CPU and on CUDA), as Inductor's attention patterns do.
// The [B, H, L, S] scores are then never written: by hand they are two matmuls, a masked softmax
// pass over L*S values per head, and copies of q, k and v into the matmuls' layouts.
//
// What is matched, at the ATen level (matmul's decomposition): the scores' bmm of q and of k
// transposed in its last two dimensions, each through views, copies and same-size expands of a
// [B, H, ., D] tensor; a multiplication or division by a Python number (the scale); optionally
// masked_fill(mask, -inf or at most -65504) with a mask computed from sizes alone that masks
// exactly the entries above the diagonal, or the addition of a bias computed from sizes alone
// that is the causal mask (transformers' eager attention; value_evaluation.h); _softmax over the
// last dimension, in float32 between two casts or not; the bmm of the probabilities with v; the
// view back to [B, H, L, Dv]. Every intermediate from
// the scores to the result must have no other reader (a training graph's softmax, saved for the
// backward, is not rewritten; a dropout on the probabilities is not matched).
//
// Before the graph changes, both forms run once on random stand-ins for q, k and v with their
// layouts: SDPA's call is traced (torch_bridge/tracer.h) into the nodes that replace the pattern,
// and its result must equal the pattern's within the dtype's tolerance. A model's layers repeat
// one attention: the check runs once per signature (operators, arguments, layouts, scale, mask
// verdict) and later layers reuse its call. (It computes the scores once more, so attention over
// more than 2^27 scores is left as written.) The view that
// made the pattern's result becomes a contiguous copy of SDPA's, which keeps every later value's
// layout; lowered, it is a load inside its reader's kernel.
#pragma once

#include "torch_bridge/tracer.h"

namespace kiln::bridge {

// Rewrites `trace` in place for a graph on `cuda_device` (-1: the CPU); returns how many
// attentions changed. Nodes the rewrite leaves without readers are removed. `sizes_vary`: the
// graph is lowered for one of many sizes (runtime sizes), so SDPA's choice is traced with cuDNN
// attention off. cuDNN builds an execution plan per new shape, 40 ms at each length of a
// decoder's growing cache on an H200 (decode_kv's 32 first calls: 4.0 s with it, 0.7 s with flash
// attention), which eager's matmuls never pay; at one size it is the faster kernel (7-11% of
// NanoGPT's and Llama's device time), and stays.
int fuse_attention(TraceResult& trace, int cuda_device, bool sizes_vary = false);

}  // namespace kiln::bridge
