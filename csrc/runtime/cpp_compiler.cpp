// System-compiler invocation and the artifact cache; see cpp_compiler.h.
#include "runtime/cpp_compiler.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "codegen/cpp/cpp_codegen.h"

namespace kiln::runtime {

uint64_t fnv1a(const std::string& data, uint64_t h) {
  for (unsigned char c : data) { h ^= c; h *= 1099511628211ull; }
  return h;
}

std::string hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string cache_dir(const std::string& configured) {
  if (!configured.empty()) return configured;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/kiln";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/kiln";
  return "/tmp/kiln-cache";
}

std::string compiler_command() {
  if (const char* c = std::getenv("CXX"); c && *c) return c;
  return "c++";
}

static bool make_dirs(const std::string& path) {
  std::string cur;
  for (size_t i = 0; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      if (!cur.empty()) {
        if (mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) return false;
      }
    }
    if (i < path.size()) cur += path[i];
  }
  return true;
}

static bool read_file(const std::string& path, std::string* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  out->assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  return true;
}

static bool write_file(const std::string& path, const std::string& data) {
  std::string tmp = path + ".tmp" + std::to_string(getpid());
  {
    std::ofstream f(tmp, std::ios::binary);
    if (!f) return false;
    f.write(data.data(), static_cast<std::streamsize>(data.size()));
    if (!f) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

static std::string check_of(const std::string& lib_bytes) {
  return std::to_string(lib_bytes.size()) + " " + hex(fnv1a(lib_bytes)) + "\n";
}

// True when <lib> exists and matches its check file.
static bool verified(const std::string& lib) {
  std::string bytes, check;
  if (!read_file(lib, &bytes) || !read_file(lib + ".check", &check)) return false;
  return check == check_of(bytes);
}

CompileResult compile_cached_source(const std::string& dir, const std::string& key,
                                    std::string (*make_source)(const void*), const void* ctx) {
  auto t0 = std::chrono::steady_clock::now();
  CompileResult r;
  if (!make_dirs(dir)) {
    r.error = "cannot create cache directory " + dir;
    return r;
  }
  const std::string lib = dir + "/" + key + ".so";
  if (verified(lib)) {
    r.library = lib;
    r.cache_hit = true;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
  }
  std::remove(lib.c_str());
  std::remove((lib + ".check").c_str());
  const std::string src = dir + "/" + key + ".cpp";
  if (!write_file(src, make_source(ctx))) {
    r.error = "cannot write " + src;
    return r;
  }
  const std::string tmp_lib = lib + ".build" + std::to_string(getpid());
  const std::string log = tmp_lib + ".log";
  std::string cmd = compiler_command() + " " + codegen::compile_flags() + " -o '" + tmp_lib + "' '" + src + "' > '" + log + "' 2>&1";
  int rc = std::system(cmd.c_str());
  if (rc != 0) {
    std::string out;
    read_file(log, &out);
    std::remove(log.c_str());
    std::remove(tmp_lib.c_str());
    if (out.size() > 2000) out = out.substr(0, 2000) + "...";
    r.error = "C++ compiler failed (" + cmd.substr(0, cmd.find(" -o ")) + ", exit " + std::to_string(WEXITSTATUS(rc)) + "): " + out;
    return r;
  }
  std::remove(log.c_str());
  std::string bytes;
  if (!read_file(tmp_lib, &bytes) || std::rename(tmp_lib.c_str(), lib.c_str()) != 0 || !write_file(lib + ".check", check_of(bytes))) {
    r.error = "cannot store " + lib;
    return r;
  }
  r.library = lib;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace kiln::runtime
