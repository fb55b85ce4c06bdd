// The decompiler's input and entry point: a plain C++ description of a CPython 3.11/3.12 code
// object (no Python.h), filled in by the binding (csrc/python/decompiler_bindings.cpp) or by
// tests from recorded fixtures, and `decompile`, which turns it into Python source text.
#pragma once
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace kiln::decompiler {

struct CodeDesc;

// One entry of co_consts. Values are rendered as source text by the binding (repr-like, valid
// Python); tuples and frozensets also list their items (keyword names, defaults, constant
// displays); code objects are described recursively.
struct ConstDesc {
  enum class Kind { Value, Tuple, FrozenSet, Code };
  Kind kind = Kind::Value;
  std::string source;           // valid Python source for the value
  bool is_str = false;          // a str constant; `str` holds its value (UTF-8)
  bool is_none = false;
  std::string str;
  std::vector<ConstDesc> items;  // Tuple / FrozenSet items
  std::shared_ptr<CodeDesc> code;
};

struct CodeDesc {
  int py_minor = 11;  // 11 or 12
  std::string name, qualname;
  std::vector<uint8_t> code;             // co_code
  std::vector<uint8_t> exception_table;  // co_exceptiontable
  std::vector<std::string> names;        // co_names
  std::vector<std::string> localsplus;   // name of each fast-locals slot (varnames, cells, frees)
  std::vector<std::string> varnames, cellvars, freevars;
  std::vector<ConstDesc> consts;
  int argcount = 0, posonlyargcount = 0, kwonlyargcount = 0, flags = 0, firstlineno = 0;
};

// CO_* flags used by the decompiler.
constexpr int kCoOptimized = 0x01, kCoNewlocals = 0x02, kCoVarargs = 0x04, kCoVarkeywords = 0x08, kCoGenerator = 0x20, kCoCoroutine = 0x80,
              kCoAsyncGenerator = 0x200;

// Raised when a construct cannot be reconstructed; names the construct and the byte offset.
class DecompileError : public std::runtime_error {
 public:
  DecompileError(const std::string& what, int offset)
      : std::runtime_error(what + " (at offset " + std::to_string(offset) + ")"), offset_(offset) {}
  int offset() const { return offset_; }

 private:
  int offset_;
};

// The source of a `def` statement for the code object (decorators and defaults are not part of
// a code object; `defaults` may give the rendered default values of the trailing positional
// parameters and `kwdefaults` name=value pairs, as the binding reads them from a function).
std::string decompile(const CodeDesc& code, const std::vector<std::string>& defaults = {},
                      const std::vector<std::pair<std::string, std::string>>& kwdefaults = {});

}  // namespace kiln::decompiler
