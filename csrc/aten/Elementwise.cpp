#include "Elementwise.h"

#include <ATen/ExpandUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TypeProperties.h>

namespace tpu::aten {

Arg Arg::of(const at::Tensor& t) {
  if (t.device().is_cpu() && t.dim() == 0) return Arg{at::Tensor(), t.item()};
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1,
              "Expected all tensors to be on the same device, but found at least two devices, tpu and ", t.device(),
              "!");
  return Arg{t, c10::Scalar()};
}

c10::ScalarType opmathType(c10::ScalarType t) {
  return (t == c10::kHalf || t == c10::kBFloat16 || at::isFloat8Type(t)) ? c10::kFloat : t;
}

c10::ScalarType valueType(c10::ScalarType t) { return at::isFloat8Type(t) ? c10::kFloat : t; }

c10::ScalarType defaultFloat() { return c10::typeMetaToScalarType(c10::get_default_dtype()); }

c10::ScalarType resultType(std::initializer_list<const Arg*> args) {
  at::native::ResultTypeState state;
  for (const Arg* a : args) {
    if (a->isTensor()) state = at::native::update_result_type_state(a->tensor, state);
    else state = at::native::update_result_type_state(a->scalar, state);
  }
  return at::native::result_type(state);
}

std::vector<int64_t> broadcastShape(std::initializer_list<const Arg*> args) {
  std::vector<int64_t> shape;
  for (const Arg* a : args)
    if (a->isTensor()) shape = at::infer_size(shape, a->tensor.sizes());
  return shape;
}

void prepareOut(const char* op, at::Tensor& out, c10::IntArrayRef shape, c10::ScalarType result) {
  TORCH_CHECK(c10::canCast(result, out.scalar_type()), op, ": result type ", result,
              " can't be cast to the desired output type ", out.scalar_type());
  at::native::resize_output(out, shape);
}

void checkInplace(const char* op, const at::Tensor& self, c10::IntArrayRef shape, c10::ScalarType result) {
  TORCH_CHECK(c10::canCast(result, self.scalar_type()), op, ": result type ", result,
              " can't be cast to the desired output type ", self.scalar_type());
  TORCH_CHECK(self.sizes().equals(shape), op, ": output with shape ", self.sizes(),
              " doesn't match the broadcast shape ", shape);
}

}  // namespace tpu::aten
