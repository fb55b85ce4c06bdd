// Wordcode assembly, exception and location tables for 3.11/3.12; see bytecode_assembler.h.
#include "frontend/bytecode/bytecode_assembler.h"

#include <stdexcept>

namespace kiln::frontend {

namespace {

int extended_args_for(int arg) {
  if (arg < 0) throw std::invalid_argument("negative instruction argument");
  return arg > 0xFFFFFF ? 3 : arg > 0xFFFF ? 2 : arg > 0xFF ? 1 : 0;
}

}  // namespace

std::vector<uint8_t> assemble(const std::vector<AsmInstruction>& code, int major, int minor, std::vector<int>* unit_of) {
  const int ext_op = opcode_number(major, minor, "EXTENDED_ARG");
  if (ext_op < 0) throw std::invalid_argument("unsupported Python version");
  const size_t n = code.size();
  std::vector<int> args(n), ext(n), start(n + 1);
  for (size_t i = 0; i < n; ++i) {
    const bool jump = opcode_jump_kind(major, minor, code[i].opcode) != 0;
    if (jump && (code[i].target < 0 || static_cast<size_t>(code[i].target) >= n)) throw std::invalid_argument("jump target out of range");
    args[i] = jump ? 0 : code[i].arg;
    ext[i] = extended_args_for(args[i]);
  }
  // Jump arguments depend on positions, which depend on the arguments' widths: widen until
  // nothing changes (widths only grow, so this ends).
  for (bool changed = true; changed;) {
    changed = false;
    start[0] = 0;
    for (size_t i = 0; i < n; ++i) start[i + 1] = start[i] + ext[i] + 1 + opcode_caches(major, minor, code[i].opcode);
    for (size_t i = 0; i < n; ++i) {
      const int kind = opcode_jump_kind(major, minor, code[i].opcode);
      if (!kind) continue;
      const int target = start[code[i].target];
      const int next = start[i] + ext[i] + 1 + opcode_caches(major, minor, code[i].opcode);
      int a = kind == 2 ? target : opcode_jumps_backward(major, minor, code[i].opcode) ? next - target : target - next;
      if (a < 0) throw std::invalid_argument("jump goes the wrong way for its opcode");
      args[i] = a;
      const int e = extended_args_for(a);
      if (e > ext[i]) { ext[i] = e; changed = true; }
    }
  }
  std::vector<uint8_t> out;
  out.reserve(static_cast<size_t>(start[n]) * 2);
  for (size_t i = 0; i < n; ++i) {
    for (int k = ext[i]; k > 0; --k) {
      out.push_back(static_cast<uint8_t>(ext_op));
      out.push_back(static_cast<uint8_t>((args[i] >> (8 * k)) & 0xFF));
    }
    out.push_back(static_cast<uint8_t>(code[i].opcode));
    out.push_back(static_cast<uint8_t>(args[i] & 0xFF));
    for (int c = opcode_caches(major, minor, code[i].opcode); c > 0; --c) { out.push_back(0); out.push_back(0); }
  }
  if (unit_of) unit_of->assign(start.begin(), start.end() - 1);
  return out;
}

std::vector<AsmInstruction> disassemble(const Bytecode& bc) {
  std::vector<AsmInstruction> out;
  out.reserve(bc.instructions().size());
  for (const Instruction& in : bc.instructions()) out.push_back({in.opcode, in.arg, in.target});
  return out;
}

// ---------------------------------------------------------------- exception tables
// Each entry is four varints (start, length, target, depth << 1 | lasti) of 6-bit chunks, most
// significant first, 0x40 marking "more follows"; the first byte of an entry carries 0x80.

std::vector<ExceptionEntry> parse_exception_table(const uint8_t* data, size_t size) {
  size_t pos = 0;
  auto varint = [&]() {
    if (pos >= size) throw std::invalid_argument("truncated exception table");
    uint8_t b = data[pos++];
    int v = b & 63;
    while (b & 64) {
      if (pos >= size) throw std::invalid_argument("truncated exception table");
      b = data[pos++];
      v = (v << 6) | (b & 63);
    }
    return v;
  };
  std::vector<ExceptionEntry> out;
  while (pos < size) {
    if (!(data[pos] & 0x80)) throw std::invalid_argument("exception table entry without a start marker");
    ExceptionEntry e;
    e.start = varint();
    e.end = e.start + varint();
    e.target = varint();
    const int dl = varint();
    e.depth = dl >> 1;
    e.lasti = dl & 1;
    out.push_back(e);
  }
  return out;
}

std::vector<uint8_t> encode_exception_table(const std::vector<ExceptionEntry>& entries) {
  std::vector<uint8_t> out;
  auto varint = [&](int v, bool first) {
    if (v < 0) throw std::invalid_argument("negative exception table value");
    int shift = 0;
    while ((v >> (shift + 6)) > 0) shift += 6;
    for (; shift >= 0; shift -= 6) {
      uint8_t b = static_cast<uint8_t>((v >> shift) & 63);
      if (shift) b |= 64;
      if (first) { b |= 0x80; first = false; }
      out.push_back(b);
    }
  };
  for (const ExceptionEntry& e : entries) {
    varint(e.start, true);
    varint(e.end - e.start, false);
    varint(e.target, false);
    varint((e.depth << 1) | (e.lasti ? 1 : 0), false);
  }
  return out;
}

// ---------------------------------------------------------------- location tables

std::vector<uint8_t> prepend_no_location(const uint8_t* linetable, size_t size, int units) {
  std::vector<uint8_t> out;
  // Entry code 15 is "no location"; the low three bits hold the length minus one (1..8 units).
  // It leaves the running line number alone, so the original entries read as before.
  for (int left = units; left > 0; left -= 8) out.push_back(static_cast<uint8_t>(0x80 | (15 << 3) | ((left > 8 ? 8 : left) - 1)));
  out.insert(out.end(), linetable, linetable + size);
  return out;
}

// ---------------------------------------------------------------- resume functions

ResumeCode build_resume_code(const Bytecode& original, const uint8_t* exception_table, size_t exception_table_size,
                             const uint8_t* line_table, size_t line_table_size, const ResumeLayout& layout, int major, int minor) {
  if (layout.target < 0 || layout.target >= original.size()) throw std::invalid_argument("resume target out of range");
  auto op = [&](const char* name) {
    int o = opcode_number(major, minor, name);
    if (o < 0) throw std::invalid_argument(std::string("no opcode ") + name);
    return o;
  };
  std::vector<AsmInstruction> code;
  if (layout.free_vars) code.push_back({op("COPY_FREE_VARS"), layout.free_vars, -1});
  code.push_back({op("RESUME"), 0, -1});
  int carrier = layout.first_carrier;
  for (bool null : layout.stack_null) code.push_back(null ? AsmInstruction{op("PUSH_NULL"), 0, -1} : AsmInstruction{op("LOAD_FAST"), carrier++, -1});
  for (int slot : layout.unbound) code.push_back({op("DELETE_FAST"), slot, -1});
  const int prologue = static_cast<int>(code.size()) + 1;
  code.push_back({op("JUMP_FORWARD"), 0, prologue + layout.target});
  int carriers = 0;
  for (bool null : layout.stack_null) carriers += !null;
  std::vector<int> slot_ops;  // instructions that name a cell or free variable by its slot
  for (const char* name : {"LOAD_DEREF", "STORE_DEREF", "DELETE_DEREF", "LOAD_CLOSURE", "MAKE_CELL", "LOAD_CLASSDEREF", "LOAD_FROM_DICT_OR_DEREF"})
    if (int o = opcode_number(major, minor, name); o >= 0) slot_ops.push_back(o);
  for (AsmInstruction in : disassemble(original)) {
    if (in.target >= 0) in.target += prologue;
    for (int o : slot_ops)
      if (in.opcode == o && in.arg >= layout.first_carrier) in.arg += carriers;
    code.push_back(in);
  }
  std::vector<int> unit_of;
  ResumeCode r;
  r.prologue = prologue;
  r.code = assemble(code, major, minor, &unit_of);
  const int shift = unit_of[prologue];
  // The original instructions keep their encoding (a renumbered slot crossing 255 would widen
  // one: refused), so everything after the prologue moves by the same number of units.
  for (int i = 0; i < original.size(); ++i)
    if (unit_of[prologue + i] != shift + original.at(i).start_offset / 2) throw std::logic_error("resume body changed its layout");
  std::vector<ExceptionEntry> table = parse_exception_table(exception_table, exception_table_size);
  for (ExceptionEntry& e : table) { e.start += shift; e.end += shift; e.target += shift; }
  r.exception_table = encode_exception_table(table);
  r.line_table = prepend_no_location(line_table, line_table_size, shift);
  return r;
}

}  // namespace kiln::frontend
