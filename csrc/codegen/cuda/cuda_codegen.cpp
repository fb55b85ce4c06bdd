// Renders loop-IR programs to CUDA C++ modules (see cuda_codegen.h): each kernel by KernelWriter
// (kernel_writer.h), with its scalar twin, autotuning alternatives and launch records.
#include "codegen/cuda/cuda_codegen.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "codegen/common/op_spelling.h"
#include "codegen/cuda/cuda_expr.h"
#include "codegen/cuda/kernel_writer.h"
#include "support/str_builder.h"

namespace kiln::codegen {
using namespace ir;
using support::StrBuilder;

std::string cuda_prefix_header() {
  static const char* text =
#include "kiln_cuda_prefix.inc"
      ;
  return text;
}

namespace {
using namespace cuda;

// A kernel and its scalar twin, rendered with one configuration under `name`. With `symbols`
// (runtime sizes), each function's text is also kept in the record (CudaKernel::text).
CudaKernel write_kernel(const Program& p, const Kernel& k, const std::string& name, const CudaConfig& config, StrBuilder& b, int symbols = 0) {
  StrBuilder vb;
  CudaKernel info = KernelWriter(p, k, true, config, symbols).write(vb, name);
  b << vb.str();
  if (symbols) info.text = vb.str();
  if (info.vector_width > 1) {
    StrBuilder sb;
    CudaKernel scalar = KernelWriter(p, k, false, config, symbols).write(sb, name + "_scalar");
    b << sb.str();
    info.scalar_name = scalar.name;
    info.scalar_launch = scalar.launch;
    if (symbols) info.scalar_text = sb.str();
  }
  return info;
}

// Configurations worth timing for a kernel besides its default: block sizes, vector accesses
// off, and for row kernels the other ways of mapping rows to threads.
std::vector<CudaConfig> tuning_configs(const Kernel& k) {
  bool reduction = false;
  for (const Stage& s : k.stages) reduction = reduction || s.kind == Stage::kReduction;
  const int thread = static_cast<int>(Strategy::kRowPerThread), warp = static_cast<int>(Strategy::kRowPerWarp),
            block = static_cast<int>(Strategy::kRowPerBlock);
  if (!reduction) return {{-1, 128, true}, {-1, 512, true}, {-1, 1024, true}, {-1, 256, false}};
  return {{thread, 128, true}, {thread, 256, true}, {warp, 128, true}, {warp, 256, true}, {warp, 512, true},
          {block, 128, true}, {block, 256, true}, {block, 512, true}, {block, 1024, true}, {-1, 0, true, false}};
}

}  // namespace

std::string config_string(const CudaConfig& c) {
  std::string s = c.strategy < 0 ? "default" : strategy_name(static_cast<Strategy>(c.strategy));
  if (c.block) s += " block=" + std::to_string(c.block);
  if (!c.vectors) s += " novec";
  if (!c.row_cache) s += " nocache";
  return s;
}

CudaModule generate_cuda(const Program& p, bool autotune, const CudaSizes* sizes) {
  CudaModule m;
  StrBuilder all;
  all << cuda_prefix_header() << "\n";
  SpellingScope scope(sizes ? &sizes->spelling : nullptr);
  const int symbols = sizes ? sizes->num_symbols : 0;
  if (symbols) autotune = false;  // one configuration serves every size
  for (const Kernel& k : p.kernels) {
    StrBuilder b;
    CudaKernel info = write_kernel(p, k, k.name, {}, b, symbols);
    info.config = "default";
    if (autotune) {
      // Each distinct alternative (rendered under a common name to compare) as <name>_t<i>.
      std::set<std::string> seen;
      {
        StrBuilder probe;
        write_kernel(p, k, "kiln_probe", {}, probe);
        seen.insert(probe.str());
      }
      for (const CudaConfig& c : tuning_configs(k)) {
        StrBuilder probe;
        write_kernel(p, k, "kiln_probe", c, probe);
        if (!seen.insert(probe.str()).second) continue;
        CudaKernel alt = write_kernel(p, k, k.name + "_t" + std::to_string(info.alternatives.size() + 1), c, b);
        alt.config = config_string(c);
        info.alternatives.push_back(std::move(alt));
      }
    }
    m.kernel_sources.push_back(b.str());
    all << m.kernel_sources.back();
    m.kernels.push_back(std::move(info));
  }
  m.source = all.str();
  return m;
}

std::optional<std::vector<CudaSizedLaunch>> cuda_sized_launches(const std::vector<CudaKernel>& kernels, const Program& p, const CudaSizes& sizes,
                                                                 std::string* why) {
  if (kernels.size() != p.kernels.size()) {
    *why = "the program has another number of kernels";
    return std::nullopt;
  }
  SpellingScope scope(&sizes.spelling);
  std::vector<CudaSizedLaunch> out;
  for (size_t i = 0; i < kernels.size(); ++i) {
    const CudaKernel& base = kernels[i];
    const Kernel& k = p.kernels[i];
    CudaConfig config;
    config.index64 = !base.index32;  // a 64-bit kernel serves sizes that would fit 32 bits
    StrBuilder vb;
    CudaKernel here = KernelWriter(p, k, true, config, sizes.num_symbols).write(vb, base.name);
    CudaSizedLaunch l;
    if (vb.str() == base.text) {
      l.launch = here.launch;
      if (l.vector) {
        StrBuilder sb;
        l.scalar_launch = KernelWriter(p, k, false, config, sizes.num_symbols).write(sb, base.scalar_name).launch;
      }
      out.push_back(l);
      continue;
    }
    // Vector accesses that do not hold at these sizes (an odd row length moves a row's start off
    // a group boundary): the scalar twin serves, if its code is the same.
    if (base.vector_width > 1) {
      StrBuilder sb;
      CudaKernel scalar = KernelWriter(p, k, false, config, sizes.num_symbols).write(sb, base.scalar_name);
      if (sb.str() == base.scalar_text) {
        l.vector = false;
        l.launch = l.scalar_launch = scalar.launch;
        out.push_back(l);
        continue;
      }
    }
    if (base.vector_width == 1) {  // a kernel without vector accesses, which these sizes would allow
      StrBuilder sb;
      CudaKernel scalar = KernelWriter(p, k, false, config, sizes.num_symbols).write(sb, base.name);
      if (sb.str() == base.text) {
        l.launch = l.scalar_launch = scalar.launch;
        out.push_back(l);
        continue;
      }
    }
    *why = "kernel " + base.name + " is generated differently at these sizes";
    return std::nullopt;
  }
  return out;
}

std::string launch_string(const CudaKernel& k) {
  StrBuilder b;
  b << k.name << ": " << k.strategy << " grid=" << static_cast<int64_t>(k.launch.grid) << " block=" << static_cast<int64_t>(k.launch.block);
  if (k.vector_width > 1) {
    b << " vec=" << k.vector_width << " aligned=[";
    b.join(k.aligned) << "] scalar grid=" << static_cast<int64_t>(k.scalar_launch.grid);
  }
  b << (k.index32 ? " index32" : " index64") << (k.checks ? " checks" : "") << " params=[";
  b.join(k.params) << "]";
  if (k.symbols) b << " symbols=" << k.symbols;
  return b.str();
}

}  // namespace kiln::codegen
