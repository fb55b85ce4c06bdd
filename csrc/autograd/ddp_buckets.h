// Graph splitting for DistributedDataParallel (DESIGN §2, the DDP optimisation).
//
// DDP all-reduces gradients in buckets of about `bucket_bytes_cap`, each launched once every
// gradient in it is ready. A compiled graph's backward is one autograd node that produces all its
// gradients at once, so no bucket could start before the whole backward ends. Splitting the graph
// where the buckets split gives one compiled pair per bucket: the backward of the last piece runs
// first and its bucket's all-reduce overlaps the backward of the pieces before it.
//
// The assignment walks the graph backwards (the order gradients become ready), adding the bytes of
// each parameter at its last reader, and starts a new piece once the current one holds a bucket's
// worth. Pure C++: the glue hands in which parameters each node reads.
#pragma once
#include <cstdint>
#include <vector>

namespace kiln::autograd {

// `reads[n]`: the parameters node n reads (nodes in execution order); `param_bytes[p]`: their
// sizes. Returns each node's piece, 0 for the first piece to run; pieces are contiguous ranges of
// nodes, each holding at least `bucket_bytes_cap` of parameters except the first.
std::vector<int> ddp_bucket_pieces(const std::vector<std::vector<int>>& reads, const std::vector<int64_t>& param_bytes,
                                   int64_t bucket_bytes_cap);

}  // namespace kiln::autograd
