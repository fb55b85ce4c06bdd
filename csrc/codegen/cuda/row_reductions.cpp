// KernelWriter's reductions (see kernel_writer.h): a stage's fold over the row, combined across
// the row's threads (warp shuffles, block all-reduce), Welford and two-pass moments, and the
// stores of the results.
#include "codegen/cuda/kernel_writer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "codegen/common/op_spelling.h"
#include "support/str_builder.h"

namespace kiln::codegen::cuda {

// Combines every thread's `v` of the row (all threads end with the result).
void KernelWriter::emit_allreduce(StrBuilder& b, const std::string& v, const std::string& combine) {
  if (strategy_ == Strategy::kRowPerWarp) {
    b << "    " << v << " = kiln::warp_allreduce(" << v << ", " << combine << ");\n";
  } else if (strategy_ == Strategy::kRowPerBlock) {
    b << "    " << v << " = kiln::block_allreduce<" << (block_ + 31) / 32 << ">(" << v << ", " << combine << ", smem);\n";
  }
}

// mean/var of a row whose folded values the value cache holds (layer norm): two passes over the
// registers, a sum for the mean and then the squared deviations from it, each reduced across the
// row's threads with plain additions. Welford states cost a division per combine, and the row's
// fold is a chain of them (pointwise_ln's kernel for sm_90: 1209 instructions per thread for its
// 16 elements with Welford states, 780 with the two passes; on an H200 104.8 -> 91.3 us, timed
// by scripts/gpu_ln_variants.py); the two passes are also the more accurate form. Where every
// thread of a block holds the same number of the row's values, each thread's own two passes are
// combined across the block in one round (kiln::block_moments) instead of reducing twice.
void KernelWriter::emit_two_pass_moments(StrBuilder& b, const Stage& s, const CachedValue& c) {
  const std::string T = temp_type(s.acc_dtype);
  const std::string r = "r" + std::to_string(s.local);
  const int64_t n = product(s.inner_sizes);
  b << "  " << T << " " << r << "_0; " << T << " " << r << "_1;\n";
  b << "  {  // mean and squared deviations, two passes over the row values\n";
  b << "    " << T << " acc = " << T << "(0);\n";
  ElementWork w;
  const Program& p = p_;
  w.body = [&](ExprEmitter& em, StrBuilder& out, const std::string& ind, bool) {
    std::string v = em.emit(s.value);
    if (s.out_buffer >= 0) out << ind << store(p, s.out_buffer, index_text(s.out_index), v) << "\n";
    out << ind << "acc += " << v << ";\n";
    return std::string();
  };
  const int V = c.V;
  emit_space_loop(b, "    ", s, n_outer_, lane_, std::to_string(width_), V, w);
  const int64_t groups = n / V;
  if (strategy_ == Strategy::kRowPerBlock && block_ % 32 == 0 && groups == static_cast<int64_t>(c.G) * width_) {
    // Every thread holds c.G whole groups: its own mean and M2, then one round across the block.
    const int count = c.G * V;
    b << "    kiln::Moments<" << T << "> mo = {acc * (" << T << "(1) / " << T << "(" << count << ")), " << T << "(0)};\n";
    for (int j = 0; j < c.G; ++j) {
      b << "    #pragma unroll\n    for (int k = 0; k < " << V << "; ++k) {\n";
      b << "      const " << T << " d = " << c.name << "[" << j << "][k] - mo.mean;\n      mo.m2 += d * d;\n    }\n";
    }
    b << "    __shared__ kiln::Moments<" << T << "> smem[32];\n";
    b << "    mo = kiln::block_moments<" << block_ / 32 << ", " << count << ">(mo, smem);\n";
    b << "    " << r << "_0 = mo.mean; " << r << "_1 = mo.m2;\n";
    b << "  }\n";
    emit_reduction_stores(b, s);
    return;
  }
  const std::string add = "[](" + T + " a, " + T + " b) { return a + b; }";
  if (strategy_ == Strategy::kRowPerBlock) b << "    __shared__ " << T << " smem[32];\n";
  emit_allreduce(b, "acc", add);
  b << "    const " << T << " mean = acc / " << T << "(" << n << ");\n";
  b << "    " << T << " m2 = " << T << "(0);\n";
  for (int j = 0; j < c.G; ++j) {
    const bool guard = (j + 1) * static_cast<int64_t>(width_) > groups;
    b << "    " << (guard ? "if (" + lane_ + " + " + std::to_string(j * width_) + " < " + std::to_string(groups) + ") {" : "{") << "\n";
    b << "      #pragma unroll\n      for (int k = 0; k < " << V << "; ++k) {\n";
    b << "        const " << T << " d = " << c.name << "[" << j << "][k] - mean;\n";
    b << "        m2 += d * d;\n      }\n    }\n";
  }
  emit_allreduce(b, "m2", add);
  b << "    " << r << "_0 = mean; " << r << "_1 = m2;\n";
  b << "  }\n";
  emit_reduction_stores(b, s);
}

void KernelWriter::emit_reduction_stores(StrBuilder& b, const Stage& s) {
  const std::string r = "r" + std::to_string(s.local);
  bool any_store = false;
  for (int sb : s.store_buffers) any_store = any_store || sb >= 0;
  if (any_store) {
    b << "  if (" << lane_ << " == 0) {\n";
    for (size_t part = 0; part < s.store_buffers.size(); ++part)
      if (s.store_buffers[part] >= 0)
        b << "    " << store(p_, s.store_buffers[part], index_text(s.store_index[part]), r + "_" + std::to_string(part)) << "\n";
    b << "  }\n";
  }
}

void KernelWriter::emit_reduction(StrBuilder& b, const Stage& s) {
  const ReduceOp op = s.reduce;
  const std::string T = temp_type(s.acc_dtype);
  const std::string r = "r" + std::to_string(s.local);
  const bool welford = op == ReduceOp::kWelford;
  if (welford && is_floating(s.acc_dtype)) {
    if (const CachedValue* c = folded_values(s)) return emit_two_pass_moments(b, s, *c);
  }
  const bool arg = op == ReduceOp::kArgMax || op == ReduceOp::kArgMin;
  const std::string max_flag = op == ReduceOp::kArgMax ? "true" : "false";
  std::string state = welford ? "kiln::WelfordState<" + T + ">" : arg ? "kiln::ArgState<" + T + ">" : T;
  if (welford || arg) b << "  " << T << " " << r << "_0; " << (arg ? "long long " : T + " ") << r << "_1;\n";
  else b << "  " << T << " " << r << "_0;\n";
  b << "  {\n";
  if (welford) b << "    " << state << " acc = {" << T << "(0), " << T << "(0), " << T << "(0)};\n";
  else if (arg) b << "    " << state << " acc = {" << literal(0, s.acc_dtype) << ", -1};\n";
  else b << "    " << state << " acc = " << identity(op, s.acc_dtype) << ";\n";
  // Position within the reduced range (row-major over the inner variables), for argmax.
  std::string position = "0";
  for (size_t j = 0; j < s.inner_sizes.size(); ++j) {
    std::string x = "static_cast<long long>(x" + std::to_string(n_outer_ + static_cast<int>(j)) + ")";
    position = j ? "(" + position + ") * " + int_text(s.inner_sizes[j]) + " + " + x : x;
  }
  ElementWork w;
  const Program& p = p_;
  w.body = [&, welford, arg, position](ExprEmitter& em, StrBuilder& out, const std::string& ind, bool) {
    std::string v = em.emit(s.value);
    if (s.out_buffer >= 0) out << ind << store(p, s.out_buffer, index_text(s.out_index), v) << "\n";
    // In a vector group the group's values are folded together after its loop (welford_group):
    // one division per group rather than one per element, which chained through a row.
    if (welford && !em.lane.empty()) out << ind << "wv[" << em.lane << "] = " << v << ";\n";
    else if (welford) out << ind << "kiln::welford_add(acc, " << v << ");\n";
    else if (arg) out << ind << "acc = kiln::arg_combine<" << max_flag << ">(acc, " << state << "{" << v << ", " << position << "});\n";
    else out << ind << "acc = " << spell(info(op).combine, "acc", v) << ";\n";
    return std::string();
  };
  if (welford) {
    w.before_group = [T](StrBuilder& out, const std::string& ind, int V) { out << ind << T << " wv[" << V << "];\n"; };
    w.after_group = [](StrBuilder& out, const std::string& ind, int) { out << ind << "kiln::welford_group(acc, wv);\n"; };
  }
  const int V = stage_vector_width(s, n_outer_, n_outer_ + static_cast<int>(s.inner_sizes.size()));
  if (s.inner_sizes.empty()) {
    b << "    if (" << lane_ << " == 0) {\n";
    ExprEmitter em(p_, b, "      ", counter_);
    w.body(em, b, "      ", false);
    b << "    }\n";
  } else {
    emit_space_loop(b, "    ", s, n_outer_, lane_, std::to_string(width_), V, w);
  }
  // Combine the threads' partial results.
  std::string combine;
  if (welford) combine = "[](" + state + " a, " + state + " b) { return kiln::welford_combine(a, b); }";
  else if (arg) combine = "[](" + state + " a, " + state + " b) { return kiln::arg_combine<" + max_flag + ">(a, b); }";
  else combine = "[](" + T + " a, " + T + " b) { return " + spell(info(op).combine, "a", "b") + "; }";
  if (strategy_ == Strategy::kRowPerBlock) b << "    __shared__ " << state << " smem[32];\n";
  emit_allreduce(b, "acc", combine);
  if (welford) b << "    " << r << "_0 = acc.mean; " << r << "_1 = acc.m2;\n";
  else if (arg) b << "    " << r << "_0 = acc.v; " << r << "_1 = acc.i;\n";
  else b << "    " << r << "_0 = acc;\n";
  b << "  }\n";
  emit_reduction_stores(b, s);
}

}  // namespace kiln::codegen::cuda
