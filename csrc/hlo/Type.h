#pragma once
// StableHLO tensor types: an element type and a static shape.
#include <cstdint>
#include <string>
#include <vector>

namespace tpu::hlo {

enum class DType : uint8_t {
  Pred, S8, S16, S32, S64, U8, U32, U64, F16, BF16, F32, F64, C64, C128,
  F8E4M3FN, F8E5M2, F8E4M3FNUZ, F8E5M2FNUZ, F8E8M0FNU,  // float8: storage and conversions, math in f32
};

const char* mlirName(DType t);  // "f32", "i1", "ui8", ...
bool isFloat(DType t);    // real floating point (not complex), float8 included
bool isFloat8(DType t);   // one of the 8-bit float formats
bool isComplex(DType t);  // complex<f32> / complex<f64>
// The component type of a complex type (C64 -> F32), else `t`; the complex type of a float one.
DType componentType(DType t);
DType complexOf(DType t);
bool isSigned(DType t);  // signed integer
size_t byteWidth(DType t);

using Shape = std::vector<int64_t>;

struct Type {
  DType dtype;
  Shape shape;
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  int64_t numel() const;
  bool operator==(const Type& o) const { return dtype == o.dtype && shape == o.shape; }
  void print(std::string& out) const;  // tensor<2x3xf32>
  std::string str() const;
};

}  // namespace tpu::hlo
