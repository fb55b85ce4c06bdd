// Decoding of 3.11/3.12 wordcode: 2-byte units (opcode, arg), EXTENDED_ARG prefixes that widen
// the next argument, and inline cache units after specialisable instructions. Jump arguments
// are relative in both versions; instructions named *BACKWARD* jump backwards.
#include "frontend/bytecode/bytecode.h"

#include <cstring>
#include "support/str_builder.h"
#include <stdexcept>

namespace kiln::frontend {

struct OpcodeTable {
  int major, minor;
  const char* names[256];
  int caches[256];
  int jump_kind[256];  // 0 none, 1 relative, 2 absolute
  const char* nb_ops[32];
  int n_nb_ops;
};

#include "frontend/bytecode/opcode_tables.inc"

static const OpcodeTable* table_for(int major, int minor) {
  if (major == 3 && minor == 11) return &kOpcodes311;
  if (major == 3 && minor == 12) return &kOpcodes312;
  return nullptr;
}

int opcode_number(int major, int minor, const std::string& name) {
  const OpcodeTable* t = table_for(major, minor);
  if (!t) return -1;
  for (int i = 0; i < 256; ++i)
    if (name == t->names[i]) return i;
  return -1;
}

int opcode_caches(int major, int minor, int opcode) {
  const OpcodeTable* t = table_for(major, minor);
  return t && opcode >= 0 && opcode < 256 ? t->caches[opcode] : 0;
}

int opcode_jump_kind(int major, int minor, int opcode) {
  const OpcodeTable* t = table_for(major, minor);
  return t && opcode >= 0 && opcode < 256 ? t->jump_kind[opcode] : 0;
}

bool opcode_jumps_backward(int major, int minor, int opcode) {
  const OpcodeTable* t = table_for(major, minor);
  return t && opcode >= 0 && opcode < 256 && std::strstr(t->names[opcode], "BACKWARD") != nullptr;
}

Bytecode::Bytecode(const uint8_t* code, size_t size, int major, int minor)
    : table_(table_for(major, minor)) {
  if (!table_) throw std::invalid_argument("unsupported Python version " + std::to_string(major) + "." + std::to_string(minor));
  if (size % 2) throw std::invalid_argument("bytecode length is odd");
  const int ext = opcode_number(major, minor, "EXTENDED_ARG");
  offset_to_index_.assign(size / 2 + 1, -1);
  int arg = 0, start = -1;
  for (size_t pos = 0; pos < size;) {
    uint8_t op = code[pos];
    arg = (arg << 8) | code[pos + 1];
    if (start < 0) start = static_cast<int>(pos);
    if (op == ext) {
      pos += 2;
      continue;
    }
    Instruction in;
    in.index = static_cast<int>(instrs_.size());
    in.offset = static_cast<int>(pos);
    in.start_offset = start;
    in.opcode = op;
    in.name = table_->names[op];
    in.arg = arg;
    for (int o = start; o <= static_cast<int>(pos); o += 2) offset_to_index_[o / 2] = in.index;
    instrs_.push_back(in);
    pos += 2 + 2 * static_cast<size_t>(table_->caches[op]);
    arg = 0;
    start = -1;
  }
  // Resolve jumps: relative to the unit after the instruction's caches.
  for (auto& in : instrs_) {
    int kind = table_->jump_kind[in.opcode];
    if (!kind) continue;
    int next_unit = in.offset / 2 + 1 + table_->caches[in.opcode];
    int unit;
    if (kind == 2) unit = in.arg;
    else if (std::strstr(in.name, "BACKWARD")) unit = next_unit - in.arg;
    else unit = next_unit + in.arg;
    if (unit < 0 || static_cast<size_t>(unit) >= offset_to_index_.size() || offset_to_index_[unit] < 0)
      throw std::invalid_argument(std::string("jump target out of range in ") + in.name);
    in.target = offset_to_index_[unit];
  }
}

int Bytecode::index_of_offset(int byte_offset) const {
  if (byte_offset < 0 || byte_offset / 2 >= static_cast<int>(offset_to_index_.size())) return -1;
  return offset_to_index_[byte_offset / 2];
}

const char* Bytecode::binary_op_name(int arg) const {
  return (arg >= 0 && arg < table_->n_nb_ops) ? table_->nb_ops[arg] : "";
}

std::string Bytecode::to_string() const {
  kiln::support::StrBuilder os;
  for (const auto& in : instrs_) {
    os << in.offset << " " << in.name << " " << in.arg;
    if (in.target >= 0) os << " -> " << instrs_[in.target].offset;
    os << "\n";
  }
  return os.str();
}

}  // namespace kiln::frontend
