// Making an autograd node across the PyTorch releases kiln builds against: 2.13 holds nodes in
// c10::intrusive_ptr, earlier releases (2.11 on the lent GPU machines) in std::shared_ptr.
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/basic_ops.h>
#include <torch/csrc/autograd/functions/utils.h>

#include <memory>
#include <type_traits>
#include <utility>

namespace kiln::bridge {

template <class T, class... Args>
auto make_node(Args&&... args) {
  if constexpr (std::is_base_of_v<c10::intrusive_ptr_target, T>) return c10::make_intrusive<T>(std::forward<Args>(args)...);
  else return std::make_shared<T>(std::forward<Args>(args)...);
}

// Gives a capture-time meta tensor `m` (no autograd history) the autograd standing of the tensor
// `of` it stands for, as far as writing it in place goes: a leaf where `of` is a leaf that requires
// grad or a view of one (eager refuses to write those while grad mode is on), else a non-leaf
// that requires grad (an identity node without edges: capture never runs its backward), so a
// write to an activation is captured as eager runs it rather than refused as a leaf's would be.
inline void requires_grad_like(at::Tensor& m, const at::Tensor& of) {
  if (!of.requires_grad()) return;
  if (of.is_leaf() || (of.is_view() && of._base().is_leaf())) {
    m.set_requires_grad(true);
    return;
  }
  torch::autograd::set_history(m, make_node<torch::autograd::Identity>());
}

}  // namespace kiln::bridge
