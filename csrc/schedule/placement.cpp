// Stage placement and loop order; see placement.h.
#include "schedule/placement.h"

#include <algorithm>
#include <numeric>

namespace kiln::schedule {

std::vector<int> loop_order(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  std::vector<int> order(sizes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    bool a1 = sizes[a] == 1, b1 = sizes[b] == 1;
    if (a1 != b1) return a1;
    if (a1) return false;
    return strides[a] > strides[b];
  });
  return order;
}

int Placement::open_kernel(std::vector<int64_t> outer) {
  ir::Kernel k;
  k.name = "kernel" + std::to_string(p_.kernels.size());
  k.outer_sizes = std::move(outer);
  p_.kernels.push_back(std::move(k));
  int id = static_cast<int>(p_.kernels.size()) - 1;
  ir::Step s;
  s.kind = ir::Step::kKernel;
  s.kernel = id;
  p_.steps.push_back(s);
  kernel_step_.push_back(static_cast<int>(p_.steps.size()) - 1);
  open_.push_back(id);
  if (open_.size() > 4) open_.erase(open_.begin());
  return id;
}

int Placement::place(const std::vector<int64_t>& sizes, int min_inner, const std::function<bool(int, int)>& build, bool exact_outer) {
  const int n = static_cast<int>(sizes.size());
  if (fuse) {
    for (auto it = open_.rbegin(); it != open_.rend(); ++it) {
      const auto& outer = p_.kernels[*it].outer_sizes;
      const int k = static_cast<int>(outer.size());
      if (k > n || (exact_outer && k != n - min_inner)) continue;
      if (!std::equal(outer.begin(), outer.end(), sizes.begin())) continue;
      if (build(*it, k)) return *it;
    }
  }
  int k = std::max(0, n - min_inner);
  int id = open_kernel(std::vector<int64_t>(sizes.begin(), sizes.begin() + k));
  build(id, k);
  return id;
}

}  // namespace kiln::schedule
