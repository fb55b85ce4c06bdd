// System-compiler invocation and the artifact cache; see cpp_compiler.h.
#include "runtime/cpp_compiler.h"

#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <mutex>
#include <thread>

#include "codegen/cpp/cpp_codegen.h"

extern char** environ;  // for posix_spawn

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

int compile_jobs(int jobs) {
  if (jobs > 0) return jobs;
  return std::max(1u, std::thread::hardware_concurrency());
}

// Names for temporary files that no other process or thread uses.
static std::string unique_suffix() {
  static std::atomic<int> counter{0};
  return "." + std::to_string(getpid()) + "_" + std::to_string(counter++);
}

// Process-wide limit on compiler processes running at once.
class JobSlots {
 public:
  void acquire(int limit) {
    std::unique_lock<std::mutex> l(m_);
    cv_.wait(l, [&] { return running_ < limit; });
    ++running_;
  }
  void release() {
    { std::lock_guard<std::mutex> l(m_); --running_; }
    cv_.notify_one();
  }
 private:
  std::mutex m_;
  std::condition_variable cv_;
  int running_ = 0;
};
static JobSlots& job_slots() {
  static JobSlots* slots = new JobSlots();  // never destroyed: threads may use it at exit
  return *slots;
}

// Runs each shell command (stdout and stderr to its log) with at most `jobs` at once; returns
// the exit statuses. posix_spawn rather than system(): it is safe from several threads.
static std::vector<int> run_commands(const std::vector<std::string>& cmds, const std::vector<std::string>& logs, int jobs) {
  std::vector<int> status(cmds.size(), -1);
  std::vector<std::thread> waiters;
  auto run_one = [&](size_t i) {
    job_slots().acquire(jobs);
    std::string line = cmds[i] + " > '" + logs[i] + "' 2>&1";
    const char* argv[] = {"sh", "-c", line.c_str(), nullptr};
    pid_t pid;
    if (posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char* const*>(argv), environ) == 0) {
      int st = 0;
      while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
      status[i] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    }
    job_slots().release();
  };
  for (size_t i = 1; i < cmds.size(); ++i) waiters.emplace_back(run_one, i);
  if (!cmds.empty()) run_one(0);
  for (auto& t : waiters) t.join();
  return status;
}

bool make_dirs(const std::string& path) {
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
  std::string tmp = path + ".tmp" + unique_suffix();
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

bool read_verified(const std::string& path, std::string* bytes) {
  std::string check;
  return read_file(path, bytes) && read_file(path + ".check", &check) && check == check_of(*bytes);
}

bool store_verified(const std::string& path, const std::string& bytes) {
  // The check goes first: whoever sees the new file also sees its check.
  return write_file(path + ".check", check_of(bytes)) && write_file(path, bytes);
}

static std::string quoted(const std::string& path) { return "'" + path + "'"; }

CompileResult compile_cached(const std::string& dir, const std::string& key,
                             const std::vector<std::string>& sources, int jobs) {
  auto t0 = std::chrono::steady_clock::now();
  CompileResult r;
  auto finish = [&](const std::string& error) {
    r.error = error;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
  };
  if (!make_dirs(dir)) return finish("cannot create cache directory " + dir);
  const std::string lib = dir + "/" + key + ".so";
  if (verified(lib)) {
    r.library = lib;
    r.cache_hit = true;
    return finish("");
  }
  // A missing or damaged entry is rebuilt and replaced by renames (never removed first: another
  // process may be storing the same key right now).
  const std::string tmp = lib + unique_suffix();
  const std::string cxx = compiler_command(), flags = codegen::compile_flags();
  std::vector<std::string> cmds, logs, objects;
  for (size_t u = 0; u < sources.size(); ++u) {
    // Sources stay in the cache next to the library, for reading and debugging.
    const std::string src = dir + "/" + key + (u ? "." + std::to_string(u) : std::string()) + ".cpp";
    if (!write_file(src, sources[u])) return finish("cannot write " + src);
    const std::string out = sources.size() == 1 ? tmp : tmp + "." + std::to_string(u) + ".o";
    cmds.push_back(cxx + " " + flags + (sources.size() == 1 ? " -shared" : " -c") + " -o " + quoted(out) + " " + quoted(src));
    logs.push_back(out + ".log");
    if (sources.size() > 1) objects.push_back(out);
  }
  const int limit = compile_jobs(jobs);
  std::vector<int> status = run_commands(cmds, logs, limit);
  if (!objects.empty() && std::count(status.begin(), status.end(), 0) == static_cast<long>(status.size())) {
    std::string link = cxx + " -shared -fopenmp -o " + quoted(tmp);
    for (const auto& o : objects) link += " " + quoted(o);
    cmds.push_back(link);
    logs.push_back(tmp + ".link.log");
    status.push_back(run_commands({link}, {logs.back()}, limit)[0]);
  }
  std::string error;
  for (size_t i = 0; i < cmds.size(); ++i) {
    std::string out;
    read_file(logs[i], &out);
    std::remove(logs[i].c_str());
    if (status[i] != 0 && error.empty()) {
      if (out.size() > 2000) out = out.substr(0, 2000) + "...";
      error = "C++ compiler failed (" + cxx + ", exit " + std::to_string(status[i]) + "): " + out;
    }
  }
  for (const auto& o : objects) std::remove(o.c_str());
  if (!error.empty()) {
    std::remove(tmp.c_str());
    return finish(error);
  }
  // The check goes first: whoever sees the new library also sees its check.
  std::string bytes;
  if (!read_file(tmp, &bytes) || !write_file(lib + ".check", check_of(bytes)) || std::rename(tmp.c_str(), lib.c_str()) != 0) {
    std::remove(tmp.c_str());
    return finish("cannot store " + lib);
  }
  r.library = lib;
  return finish("");
}

}  // namespace kiln::runtime
