// Compiling generated C++ into a shared library with the system compiler, through a
// content-addressed on-disk cache (DESIGN §3: artifacts cached by content hash).
//
// <cache>/<key>.so sits next to <key>.so.check (its size and hash). A library whose check does
// not match (truncated, corrupted, half-written) is removed and rebuilt. Writes go through a
// temporary name and a rename, so concurrent processes never see a partial file.
#pragma once
#include <cstdint>
#include <string>

namespace kiln::runtime {

uint64_t fnv1a(const std::string& data, uint64_t seed = 1469598103934665603ull);
std::string hex(uint64_t v);

struct CompileResult {
  std::string library;   // path of the .so, empty on failure
  std::string error;     // readable reason on failure
  bool cache_hit = false;
  double seconds = 0;
};

// The cache directory: KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln.
std::string cache_dir(const std::string& configured);
// Returns the library for `key`, compiling `source_fn()` only when it is not cached.
template <class SourceFn>
CompileResult compile_cached(const std::string& dir, const std::string& key, SourceFn source_fn);
CompileResult compile_cached_source(const std::string& dir, const std::string& key,
                                    std::string (*make_source)(const void*), const void* ctx);
// The C++ compiler to run: $CXX, else c++.
std::string compiler_command();

template <class SourceFn>
CompileResult compile_cached(const std::string& dir, const std::string& key, SourceFn source_fn) {
  return compile_cached_source(dir, key, [](const void* c) { return (*static_cast<const SourceFn*>(c))(); }, &source_fn);
}

}  // namespace kiln::runtime
