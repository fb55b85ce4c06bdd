// Duplicate kernels of a CUDA module; see kernel_dedup.h.
#include "codegen/cuda/kernel_dedup.h"

#include <unordered_map>

namespace kiln::codegen {

namespace {
bool ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool ident_char(char c) { return ident_start(c) || (c >= '0' && c <= '9'); }
bool digits(const std::string& s, size_t from) {
  if (from >= s.size()) return false;
  for (size_t i = from; i < s.size(); ++i)
    if (s[i] < '0' || s[i] > '9') return false;
  return true;
}
}  // namespace

std::string canonical_kernel_text(const std::string& source, const std::string& name) {
  if (source.find('"') != std::string::npos || source.find('\'') != std::string::npos) return source;
  std::string out;
  out.reserve(source.size());
  std::unordered_map<std::string, int> buffers;
  size_t i = 0;
  const size_t n = source.size();
  while (i < n) {
    const char c = source[i];
    if (c == '/' && i + 1 < n && source[i + 1] == '/') {  // a comment, to the end of its line
      while (i < n && source[i] != '\n') ++i;
      continue;
    }
    if (ident_start(c)) {
      size_t j = i;
      while (j < n && ident_char(source[j])) ++j;
      const std::string id = source.substr(i, j - i);
      i = j;
      if (!name.empty() && id.compare(0, name.size(), name) == 0 && (id.size() == name.size() || id[name.size()] == '_')) {
        out += "@K" + id.substr(name.size());  // '@' is in no C++ identifier
      } else if (id[0] == 'b' && digits(id, 1)) {
        auto it = buffers.emplace(id, static_cast<int>(buffers.size())).first;
        out += "@B" + std::to_string(it->second);
      } else {
        out += id;
      }
      continue;
    }
    if (c >= '0' && c <= '9') {  // a number (its suffix letters are not an identifier)
      while (i < n && ident_char(source[i])) out += source[i++];
      continue;
    }
    out += c;
    ++i;
  }
  return out;
}

std::vector<int> same_kernels(const CudaModule& m) {
  std::vector<int> same(m.kernels.size());
  std::unordered_map<std::string, int> first;
  for (size_t k = 0; k < m.kernels.size(); ++k) {
    const std::string& src = k < m.kernel_sources.size() ? m.kernel_sources[k] : std::string();
    same[k] = first.emplace(canonical_kernel_text(src, m.kernels[k].name), static_cast<int>(k)).first->second;
  }
  return same;
}

}  // namespace kiln::codegen
