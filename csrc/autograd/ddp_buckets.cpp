// See ddp_buckets.h.
#include "autograd/ddp_buckets.h"

#include <stdexcept>

namespace kiln::autograd {

std::vector<int> ddp_bucket_pieces(const std::vector<std::vector<int>>& reads, const std::vector<int64_t>& param_bytes,
                                   int64_t bucket_bytes_cap) {
  const int n = static_cast<int>(reads.size());
  std::vector<int> from_end(n, 0);  // piece counted from the end of the graph
  std::vector<bool> seen(param_bytes.size(), false);
  int piece = 0;
  int64_t bytes = 0;
  for (int i = n - 1; i >= 0; --i) {
    if (bytes >= bucket_bytes_cap && bucket_bytes_cap > 0) {  // the piece after this node is full
      ++piece;
      bytes = 0;
    }
    for (int p : reads[i]) {
      if (p < 0 || p >= static_cast<int>(param_bytes.size())) throw std::out_of_range("ddp_bucket_pieces: parameter index");
      if (seen[p]) continue;
      seen[p] = true;
      bytes += param_bytes[p];
    }
    from_end[i] = piece;
  }
  // A last piece (the first to run) without parameters of its own would hold only the inputs'
  // preprocessing: it joins the piece after it.
  bool first_has_params = false;
  for (int i = 0; i < n && from_end[i] == piece; ++i) first_has_params |= !reads[i].empty();
  if (!first_has_params && piece > 0)
    for (int i = 0; i < n && from_end[i] == piece; ++i) from_end[i] = piece - 1;
  int last = first_has_params || piece == 0 ? piece : piece - 1;
  std::vector<int> out(n);
  for (int i = 0; i < n; ++i) out[i] = last - from_end[i];
  return out;
}

}  // namespace kiln::autograd
