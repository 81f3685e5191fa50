// ATen's FFT primitives on stablehlo.fft (lowering/Fft.cpp). Every torch.fft function (fft, ifft, rfft,
// irfft, hfft, ihfft and their 2-D / n-D forms), stft and istft are PyTorch composites over these three.
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "OpRunner.h"
#include "csrc/lowering/Fft.h"

namespace tpu::aten {
namespace {

std::vector<int64_t> wrapDims(const char* op, const at::Tensor& self, at::IntArrayRef dim) {
  TORCH_CHECK(!dim.empty(), op, ": expected at least one dim to transform");
  std::vector<int64_t> dims;
  for (int64_t d : dim) dims.push_back(at::maybe_wrap_dim(d, self.dim()));
  return dims;
}

void checkNorm(const char* op, int64_t normalization) {
  TORCH_CHECK(normalization >= 0 && normalization <= 2, op, ": normalization must be 0, 1 or 2, got ",
              normalization);
}

void checkType(const char* op, const at::Tensor& self, bool complexIn) {
  c10::ScalarType t = self.scalar_type();
  if (complexIn) {
    TORCH_CHECK(t == c10::kComplexFloat || t == c10::kComplexDouble, op,
                ": expected a complex64 or complex128 input on tpu, got ", t);
  } else {
    TORCH_CHECK(t == c10::kFloat || t == c10::kDouble, op, ": expected a float32 or float64 input on tpu, got ", t,
                " (float16/bfloat16 FFTs are not supported on tpu; convert to float32 first)");
  }
}

// ---- _fft_c2c --------------------------------------------------------------------------------

at::Tensor& c2cOut(const at::Tensor& self, c10::SymIntArrayRef dim, int64_t normalization, bool forward,
                   at::Tensor& out) {
  checkType("_fft_c2c", self, true);
  checkNorm("_fft_c2c", normalization);
  std::vector<int64_t> dims = wrapDims("_fft_c2c", self, C10_AS_INTARRAYREF_SLOW(dim));
  at::native::resize_output(out, self.sizes());
  if (out.numel() == 0) return out;
  TPU_OP("aten::_fft_c2c").in(self).attrs(dims).attr(normalization).attr(forward).out(out)
      .run([&](hlo::Builder& b, Values in, Values) {
        return ValueList{lowering::fftC2c(b, in[0], dims, normalization, forward)};
      });
  return out;
}

at::Tensor c2c(const at::Tensor& self, c10::SymIntArrayRef dim, int64_t normalization, bool forward) {
  at::Tensor out = at::empty(self.sizes(), self.options());
  return c2cOut(self, dim, normalization, forward, out);
}

// ---- _fft_r2c --------------------------------------------------------------------------------

at::Tensor& r2cOut(const at::Tensor& self, at::IntArrayRef dim, int64_t normalization, bool onesided,
                   at::Tensor& out) {
  checkType("_fft_r2c", self, false);
  checkNorm("_fft_r2c", normalization);
  std::vector<int64_t> dims = wrapDims("_fft_r2c", self, dim);
  std::vector<int64_t> shape = self.sizes().vec();
  if (onesided) shape[dims.back()] = shape[dims.back()] / 2 + 1;
  TORCH_CHECK(out.scalar_type() == c10::toComplexType(self.scalar_type()), "_fft_r2c: expected out of dtype ",
              c10::toComplexType(self.scalar_type()), ", got ", out.scalar_type());
  at::native::resize_output(out, shape);
  if (out.numel() == 0) return out;
  TPU_OP("aten::_fft_r2c").in(self).attrs(dims).attr(normalization).attr(onesided).out(out)
      .run([&](hlo::Builder& b, Values in, Values) {
        return ValueList{lowering::fftR2c(b, in[0], dims, normalization, onesided)};
      });
  return out;
}

at::Tensor r2c(const at::Tensor& self, at::IntArrayRef dim, int64_t normalization, bool onesided) {
  at::Tensor out = at::empty({0}, self.options().dtype(c10::toComplexType(self.scalar_type())));
  return r2cOut(self, dim, normalization, onesided, out);
}

// ---- _fft_c2r --------------------------------------------------------------------------------

at::Tensor& c2rOut(const at::Tensor& self, at::IntArrayRef dim, int64_t normalization, c10::SymInt lastDimSize,
                   at::Tensor& out) {
  checkType("_fft_c2r", self, true);
  checkNorm("_fft_c2r", normalization);
  std::vector<int64_t> dims = wrapDims("_fft_c2r", self, dim);
  int64_t n = lastDimSize.guard_int(__FILE__, __LINE__);
  TORCH_CHECK(n >= 1, "_fft_c2r: Invalid number of data points (", n, ") specified");
  std::vector<int64_t> shape = self.sizes().vec();
  shape[dims.back()] = n;
  TORCH_CHECK(out.scalar_type() == c10::toRealValueType(self.scalar_type()), "_fft_c2r: expected out of dtype ",
              c10::toRealValueType(self.scalar_type()), ", got ", out.scalar_type());
  at::native::resize_output(out, shape);
  if (out.numel() == 0) return out;
  TPU_OP("aten::_fft_c2r").in(self).attrs(dims).attr(normalization).attr(n).out(out)
      .run([&](hlo::Builder& b, Values in, Values) {
        return ValueList{lowering::fftC2r(b, in[0], dims, normalization, n)};
      });
  return out;
}

at::Tensor c2r(const at::Tensor& self, at::IntArrayRef dim, int64_t normalization, c10::SymInt lastDimSize) {
  at::Tensor out = at::empty({0}, self.options().dtype(c10::toRealValueType(self.scalar_type())));
  return c2rOut(self, dim, normalization, std::move(lastDimSize), out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fft_c2c", c2c);
  m.impl("_fft_c2c.out", c2cOut);
  m.impl("_fft_r2c", r2c);
  m.impl("_fft_r2c.out", r2cOut);
  m.impl("_fft_c2r", c2r);
  m.impl("_fft_c2r.out", c2rOut);
}

}  // namespace tpu::aten
