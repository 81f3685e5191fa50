#include "Fft.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace tpu::lowering {
namespace {

enum class FftType { Fft, Ifft, Rfft, Irfft };

const char* typeName(FftType t) {
  switch (t) {
    case FftType::Fft: return "FFT";
    case FftType::Ifft: return "IFFT";
    case FftType::Rfft: return "RFFT";
    case FftType::Irfft: return "IRFFT";
  }
  return "FFT";
}

// stablehlo.fft over the trailing lengths.size() dims of x.
Value rawFft(Builder& b, Value x, FftType t, const std::vector<int64_t>& lengths) {
  hlo::Shape shape = x.shape();
  hlo::DType dt = x.dtype();
  size_t last = shape.size() - 1;
  if (t == FftType::Rfft) {
    dt = hlo::complexOf(dt);
    shape[last] = lengths.back() / 2 + 1;
  } else if (t == FftType::Irfft) {
    dt = hlo::componentType(dt);
    shape[last] = lengths.back();
  }
  std::string attrs = std::string("fft_type = #stablehlo<fft_type ") + typeName(t) + ">, fft_length = " +
                      hlo::i64Array(lengths);
  return b.op("stablehlo.fft", {&x, 1}, {hlo::Type{dt, shape}}, attrs)[0];
}

// x with `dims` moved to the end (in that order): {transposed, permutation}.
std::pair<Value, std::vector<int64_t>> toEnd(Builder& b, Value x, const std::vector<int64_t>& dims) {
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < x.rank(); ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) perm.push_back(d);
  perm.insert(perm.end(), dims.begin(), dims.end());
  return {b.transpose(x, perm), perm};
}

Value back(Builder& b, Value y, const std::vector<int64_t>& perm) {
  std::vector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[perm[i]] = static_cast<int64_t>(i);
  return b.transpose(y, inv);
}

// One transform of type t over `dims` (at most three) of x.
Value fftOver(Builder& b, Value x, FftType t, const std::vector<int64_t>& dims, int64_t lastLength = -1) {
  auto [y, perm] = toEnd(b, x, dims);
  std::vector<int64_t> lengths;
  for (int64_t d : dims) lengths.push_back(x.shape()[d]);
  if (lastLength >= 0) lengths.back() = lastLength;
  return back(b, rawFft(b, y, t, lengths), perm);
}

int64_t product(const Value& x, const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= x.shape()[d];
  return n;
}

// Complex c2c over all of `dims`, in groups of three, unnormalized forward / XLA-normalized inverse.
Value c2cGroups(Builder& b, Value x, std::vector<int64_t> dims, bool forward) {
  while (!dims.empty()) {
    size_t k = std::min<size_t>(3, dims.size());
    std::vector<int64_t> group(dims.end() - k, dims.end());
    dims.resize(dims.size() - k);
    x = fftOver(b, x, forward ? FftType::Fft : FftType::Ifft, group);
  }
  return x;
}

// Multiplies by the real factor f (skipped when exactly 1).
Value scale(Builder& b, Value x, double f) {
  if (f == 1.0) return x;
  return b.mul(x, b.scalarLike(x, f));
}

double normFactor(int64_t normalization, double n) {
  if (normalization == 1) return 1.0 / std::sqrt(n);
  if (normalization == 2) return 1.0 / n;
  return 1.0;
}

}  // namespace

Value fftC2c(Builder& b, Value x, const std::vector<int64_t>& dims, int64_t normalization, bool forward) {
  if (dims.empty()) return x;
  double n = static_cast<double>(product(x, dims));
  Value y = c2cGroups(b, x, dims, forward);
  // XLA's inverse already divided by n.
  return scale(b, y, forward ? normFactor(normalization, n) : n * normFactor(normalization, n));
}

Value fftR2c(Builder& b, Value x, const std::vector<int64_t>& dims, int64_t normalization, bool onesided) {
  if (!onesided) return fftC2c(b, b.convert(x, hlo::complexOf(x.dtype())), dims, normalization, true);
  double n = static_cast<double>(product(x, dims));
  Value y = fftOver(b, x, FftType::Rfft, {dims.back()});
  y = c2cGroups(b, y, std::vector<int64_t>(dims.begin(), dims.end() - 1), true);
  return scale(b, y, normFactor(normalization, n));
}

Value fftC2r(Builder& b, Value x, const std::vector<int64_t>& dims, int64_t normalization, int64_t lastDimSize) {
  int64_t last = dims.back(), half = lastDimSize / 2 + 1;
  // The half spectrum XLA expects: exactly lastDimSize/2+1 entries along the last dim.
  if (x.shape()[last] > half) {
    std::vector<int64_t> lo(x.rank(), 0), hi = x.shape(), st(x.rank(), 1);
    hi[last] = half;
    x = b.slice(x, lo, hi, st);
  } else if (x.shape()[last] < half) {
    std::vector<int64_t> lo(x.rank(), 0), hi(x.rank(), 0), in(x.rank(), 0);
    hi[last] = half - x.shape()[last];
    x = b.pad(x, b.constant(x.dtype(), 0), lo, hi, in);
  }
  double n = static_cast<double>(product(x, std::vector<int64_t>(dims.begin(), dims.end() - 1))) *
             static_cast<double>(lastDimSize);
  Value y = c2cGroups(b, x, std::vector<int64_t>(dims.begin(), dims.end() - 1), false);
  y = fftOver(b, y, FftType::Irfft, {last}, lastDimSize);
  return scale(b, y, n * normFactor(normalization, n));
}

}  // namespace tpu::lowering
