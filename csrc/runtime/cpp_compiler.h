// Compiling generated C++ into a shared library with the system compiler, through a
// content-addressed on-disk cache (DESIGN §3: artifacts cached by content hash).
//
// <cache>/<key>.so sits next to <key>.so.check (its size and hash). A library whose check does
// not match (truncated, corrupted, half-written) is rebuilt and replaced. Writes go through a
// temporary name and a rename, so concurrent processes and threads never see a partial file.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

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
// Returns the library for `key`, compiling the translation units `sources` only when it is not
// cached. Units compile concurrently (each an object file, then one link); at most `jobs`
// compiler processes run at once in this process (0: one per CPU).
CompileResult compile_cached(const std::string& dir, const std::string& key,
                             const std::vector<std::string>& sources, int jobs = 0);
// Cache files with a check file beside them, as above (the CUDA cubin cache uses them too):
// read_verified is false for a missing or damaged entry; store_verified writes through renames.
bool make_dirs(const std::string& path);
bool read_verified(const std::string& path, std::string* bytes);
bool store_verified(const std::string& path, const std::string& bytes);
// The C++ compiler to run: $CXX, else c++.
std::string compiler_command();
// How many compiler processes `jobs` allows (0: the number of CPUs).
int compile_jobs(int jobs);

}  // namespace kiln::runtime
