// Bytecode assembly for CPython 3.11 and 3.12, without Python.h: the inverse of bytecode.h.
//
// Instructions whose jumps name instruction indices become wordcode with the EXTENDED_ARG
// prefixes their arguments need and zeroed inline caches; exception tables and line tables are
// read and written in CPython's own formats. The frontend builds resume functions with it (a
// prologue that rebuilds a frame's state, then the original code); tests round-trip every code
// object of the standard library and PyTorch through decode and assemble, byte for byte.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "frontend/bytecode/bytecode.h"

namespace kiln::frontend {

struct AsmInstruction {
  int opcode = 0;
  int arg = 0;
  int target = -1;  // jumps: index of the instruction jumped to (the argument is computed)
};

// Wordcode for the instructions; `unit_of` (optional) receives each instruction's position in
// code units, EXTENDED_ARG prefixes included. Throws std::invalid_argument on a bad target.
std::vector<uint8_t> assemble(const std::vector<AsmInstruction>& code, int major, int minor,
                              std::vector<int>* unit_of = nullptr);

// The instructions of decoded bytecode, jumps by index: assemble(disassemble(b)) gives b back.
std::vector<AsmInstruction> disassemble(const Bytecode& bc);

// One row of a code object's exception table (co_exceptiontable), in code units.
struct ExceptionEntry {
  int start = 0, end = 0;  // covered units [start, end)
  int target = 0;
  int depth = 0;
  bool lasti = false;
};
std::vector<ExceptionEntry> parse_exception_table(const uint8_t* data, size_t size);
std::vector<uint8_t> encode_exception_table(const std::vector<ExceptionEntry>& entries);

// A location table (co_linetable) with `units` code units of "no location" in front.
std::vector<uint8_t> prepend_no_location(const uint8_t* linetable, size_t size, int units);

// What a resume function's prologue must rebuild before jumping into the original code.
struct ResumeLayout {
  int target = 0;                 // index (in the original decoded code) execution continues at
  int first_carrier = 0;          // local slot of the first stack carrier argument
  std::vector<bool> stack_null;   // the live stack, bottom first: NULL (pushed) or a carrier
  std::vector<int> unbound;       // local slots that are unbound at the target
  int free_vars = 0;              // the code's free variables: copied from the closure first, and
                                  // their slots (after the carriers) renumbered in the body
};

// The new code, exception table and line table of a resume function: a prologue (free variables
// copied, RESUME, the stack loaded from carrier locals, unbound locals deleted, a jump to the
// target), then the original instructions, unchanged but for the slot numbers of free
// variables, which the carriers push back. Exception-table ranges move with the code.
struct ResumeCode {
  std::vector<uint8_t> code, exception_table, line_table;
  int prologue = 0;  // instructions before the original code (original index i is at prologue + i)
};
ResumeCode build_resume_code(const Bytecode& original, const uint8_t* exception_table, size_t exception_table_size,
                             const uint8_t* line_table, size_t line_table_size, const ResumeLayout& layout, int major, int minor);

}  // namespace kiln::frontend
