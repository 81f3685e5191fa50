// torch._assert_async on tpu: asynchronous, as CUDA's device-side assert. The check runs in the
// program (through the device's error flag, like out-of-range indices) and a failure raises
// RuntimeError with CPU's message at the next synchronization, or at the op in debug mode; the
// call itself never waits for the device.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <string>

#include "csrc/aten/OpRunner.h"

namespace tpu::aten {
namespace {

void assertNonzero(const at::Tensor& self, const std::string& message) {
  // CPU's checks and words (Tensor::item's).
  TORCH_CHECK(self.numel() != 0, "Boolean value of Tensor with no values is ambiguous");
  TORCH_CHECK(self.numel() == 1, "Boolean value of Tensor with more than one value is ambiguous");
  TPU_OP("aten::_assert_async").in(self).asserts(message).run([](hlo::Builder& b, Values in, Values) {
    hlo::Value x = b.reshape(in[0], {});
    return ValueList{b.compare(hlo::Cmp::EQ, x, b.scalarLike(x, 0))};  // zero (false) fails; NaN passes
  });
}

void assertAsync(const at::Tensor& self) {
  static const std::string message = "Expected Tensor with single nonzero value, but got zero";
  assertNonzero(self, message);
}

void assertAsyncMsg(const at::Tensor& self, c10::string_view assertMsg) {
  assertNonzero(self, assertMsg.empty() ? std::string("Assertion is failed") : std::string(assertMsg));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_assert_async", assertAsync);
  m.impl("_assert_async.msg", assertAsyncMsg);
}

}  // namespace tpu::aten
