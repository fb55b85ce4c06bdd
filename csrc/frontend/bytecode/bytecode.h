// Bytecode decoding for CPython 3.11 and 3.12, without Python.h.
//
// The symbolic interpreter walks instructions rather than raw bytes: this file turns a code
// object's `co_code` (the de-specialised form CPython exposes) into a flat list with EXTENDED_ARG
// folded, inline CACHE entries skipped and jump targets resolved to instruction indices. It is
// pure C++ so it can be unit-tested on recorded bytecode of both Python versions.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::frontend {

struct OpcodeTable;

struct Instruction {
  int index = 0;        // position in the decoded list
  int offset = 0;       // byte offset of the opcode in co_code (EXTENDED_ARG prefixes excluded)
  int start_offset = 0; // byte offset of the first EXTENDED_ARG prefix, or of the opcode
  uint8_t opcode = 0;
  const char* name = "";
  int arg = 0;
  int target = -1;      // decoded index a jump goes to, or -1
};

class Bytecode {
 public:
  // Raises std::invalid_argument for an unsupported version or malformed bytes.
  Bytecode(const uint8_t* code, size_t size, int major, int minor);

  const std::vector<Instruction>& instructions() const { return instrs_; }
  const Instruction& at(int i) const { return instrs_.at(i); }
  int size() const { return static_cast<int>(instrs_.size()); }
  // Decoded index of the instruction starting at a byte offset, or -1.
  int index_of_offset(int byte_offset) const;
  // Name of a BINARY_OP sub-operation (e.g. "NB_ADD"), or "" if out of range.
  const char* binary_op_name(int arg) const;
  // A listing like `dis` prints, one instruction a line (used by tests and debug dumps).
  std::string to_string() const;

 private:
  const OpcodeTable* table_;
  std::vector<Instruction> instrs_;
  std::vector<int> offset_to_index_;
};

// Looks up an opcode number by name for a version; -1 if the version lacks it.
int opcode_number(int major, int minor, const std::string& name);
// Per-version facts about an opcode: its inline cache units, and how it encodes a jump (0: not a
// jump, 1: relative, forward or backward as its name says, 2: absolute).
int opcode_caches(int major, int minor, int opcode);
int opcode_jump_kind(int major, int minor, int opcode);
bool opcode_jumps_backward(int major, int minor, int opcode);

}  // namespace kiln::frontend
