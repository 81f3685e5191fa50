#pragma once
// FFT lowerings on stablehlo.fft, for ATen's three primitives (_fft_c2c, _fft_r2c, _fft_c2r).
// stablehlo.fft transforms the trailing 1-3 dims, so the requested dims are transposed to the end
// (in groups of at most three; the DFT is separable) and back. XLA's inverse transforms divide by
// the transformed length; `normalization` is ATen's: 0 none, 1 by 1/sqrt(n), 2 by 1/n, applied to
// the unnormalized transform in the direction asked.
#include <vector>

#include "csrc/hlo/Builder.h"

namespace tpu::lowering {

using hlo::Builder;
using hlo::Value;

// Complex -> complex over `dims` (forward: e^-i, else e^+i).
Value fftC2c(Builder& b, Value x, const std::vector<int64_t>& dims, int64_t normalization, bool forward);
// Real -> complex forward over `dims`; dims.back() keeps n/2+1 entries when `onesided`.
Value fftR2c(Builder& b, Value x, const std::vector<int64_t>& dims, int64_t normalization, bool onesided);
// Complex (Hermitian half along dims.back()) -> real inverse; dims.back() becomes `lastDimSize` long.
Value fftC2r(Builder& b, Value x, const std::vector<int64_t>& dims, int64_t normalization, int64_t lastDimSize);

}  // namespace tpu::lowering
