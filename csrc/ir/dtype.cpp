// Names and promotion for kiln::ir::DType.
#include "ir/dtype.h"

namespace kiln::ir {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kUInt8: return "u8";
    case DType::kInt8: return "i8";
    case DType::kInt16: return "i16";
    case DType::kInt32: return "i32";
    case DType::kInt64: return "i64";
    case DType::kFloat16: return "f16";
    case DType::kFloat32: return "f32";
    case DType::kFloat64: return "f64";
    case DType::kBool: return "b8";
    case DType::kBFloat16: return "bf16";
    default: return "unknown";
  }
}

const char* dtype_ctype(DType t) {
  switch (t) {
    case DType::kUInt8: return "uint8_t";
    case DType::kInt8: return "int8_t";
    case DType::kInt16: return "int16_t";
    case DType::kInt32: return "int32_t";
    case DType::kInt64: return "int64_t";
    case DType::kFloat16: return "kiln::f16";
    case DType::kFloat32: return "float";
    case DType::kFloat64: return "double";
    case DType::kBool: return "bool";
    case DType::kBFloat16: return "kiln::bf16";
    default: return "void";
  }
}

DType dtype_from_int(int v) {
  switch (v) {
    case 0: case 1: case 2: case 3: case 4: case 5: case 6: case 7: case 11: case 15:
      return static_cast<DType>(v);
    default: return DType::kUnknown;
  }
}

static int rank(DType t) {
  switch (t) {
    case DType::kBool: return 0;
    case DType::kUInt8: return 1;
    case DType::kInt8: return 1;
    case DType::kInt16: return 2;
    case DType::kInt32: return 3;
    case DType::kInt64: return 4;
    case DType::kFloat16: return 5;
    case DType::kBFloat16: return 5;
    case DType::kFloat32: return 6;
    case DType::kFloat64: return 7;
    default: return -1;
  }
}

DType promote(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::kUnknown || b == DType::kUnknown) return DType::kUnknown;
  // f16 with bf16 promotes to f32; u8 with i8 promotes to i16.
  if ((a == DType::kFloat16 && b == DType::kBFloat16) || (a == DType::kBFloat16 && b == DType::kFloat16)) return DType::kFloat32;
  if ((a == DType::kUInt8 && b == DType::kInt8) || (a == DType::kInt8 && b == DType::kUInt8)) return DType::kInt16;
  return rank(a) >= rank(b) ? a : b;
}

}  // namespace kiln::ir
