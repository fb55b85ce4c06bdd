// A minimal string builder with `<<`, used instead of std::ostringstream.
//
// kiln._C is loaded into processes whose C++ runtime may differ from the compiler's headers
// (seen on the GPU machine: GCC 13 headers, a Python process whose runtime left the iostream
// locale facets unset, so ostringstream << long crashed). Formatting with std::to_string and
// snprintf needs no locale or iostream state, so it behaves the same everywhere.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <vector>

namespace kiln::support {

class StrBuilder {
 public:
  StrBuilder& operator<<(const std::string& s) { s_ += s; return *this; }
  StrBuilder& operator<<(const char* s) { s_ += s; return *this; }
  StrBuilder& operator<<(char c) { s_ += c; return *this; }
  StrBuilder& operator<<(bool b) { s_ += b ? "1" : "0"; return *this; }
  // Doubles print in the fewest digits that read back exactly (textual IR and cache keys rely on it).
  StrBuilder& operator<<(double d) {
    char buf[32];
    for (int precision = 6; precision <= 17; ++precision) {
      std::snprintf(buf, sizeof buf, "%.*g", precision, d);
      if (std::strtod(buf, nullptr) == d || d != d) break;
    }
    s_ += buf;
    return *this;
  }
  template <class T, class = std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool> && !std::is_same_v<T, char>>>
  StrBuilder& operator<<(T v) { s_ += std::to_string(v); return *this; }
  // Items separated by `sep` ("1, 2, 3"): the lists of every textual IR.
  template <class T>
  StrBuilder& join(const std::vector<T>& items, const char* sep = ", ") {
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) s_ += sep;
      *this << items[i];
    }
    return *this;
  }
  const std::string& str() const { return s_; }

 private:
  std::string s_;
};

}  // namespace kiln::support
