#pragma once
// Dimension lists the lowerings build again and again.
#include <cstdint>
#include <vector>

namespace tpu::lowering {

// 0, 1, ..., n-1: every dim of a rank-n value, or its n leading (batch) dims.
inline std::vector<int64_t> upto(int64_t n) {
  std::vector<int64_t> dims(static_cast<size_t>(n > 0 ? n : 0));
  for (int64_t i = 0; i < n; ++i) dims[static_cast<size_t>(i)] = i;
  return dims;
}

}  // namespace tpu::lowering
