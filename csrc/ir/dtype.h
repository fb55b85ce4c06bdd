// Element types of the loop IR and the ATen graph. The numbering equals c10::ScalarType's, so
// the bridge converts with a cast (checked there by static_assert); nothing here includes c10.
#pragma once
#include <cstdint>
#include <string>

namespace kiln::ir {

enum class DType : int8_t {
  kUInt8 = 0, kInt8 = 1, kInt16 = 2, kInt32 = 3, kInt64 = 4, kFloat16 = 5, kFloat32 = 6,
  kFloat64 = 7, kBool = 11, kBFloat16 = 15, kUnknown = -1,
};

inline bool is_floating(DType t) {
  return t == DType::kFloat16 || t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kBFloat16;
}
inline bool is_integral(DType t, bool include_bool) {
  switch (t) {
    case DType::kUInt8: case DType::kInt8: case DType::kInt16: case DType::kInt32: case DType::kInt64: return true;
    case DType::kBool: return include_bool;
    default: return false;
  }
}
// True for the types generated code can compute on (complex, fp8 and friends are not).
inline bool is_supported(DType t) { return t != DType::kUnknown; }
inline int element_size(DType t) {
  switch (t) {
    case DType::kUInt8: case DType::kInt8: case DType::kBool: return 1;
    case DType::kInt16: case DType::kFloat16: case DType::kBFloat16: return 2;
    case DType::kInt32: case DType::kFloat32: return 4;
    default: return 8;
  }
}
// Short name used in textual IR ("f32", "i64", "b8"...).
const char* dtype_name(DType t);
// C++ type name used by generated code ("float", "int64_t", "bool", "kiln::bf16"...).
const char* dtype_ctype(DType t);
DType dtype_from_int(int v);
// The type arithmetic on two values of these types is done in (PyTorch's promotion lattice for
// the types kiln supports; used where the traced graph does not already tell the result type).
DType promote(DType a, DType b);

}  // namespace kiln::ir
