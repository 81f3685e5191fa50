// torch._scaled_mm on tpu: the float8 matmul of FP8 inference (vLLM's fp8 linear layers, torchao), with a
// tensor-wise or row-wise scale per operand, one program per signature. The float8 operands are read as
// float32 (float8 is a storage format on tpu) and contracted in float32, as CPU's kernel does; the runtime
// rounds the result to the output dtype once.
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "OpRunner.h"
#include "csrc/lowering/Matmul.h"

namespace tpu::aten {
namespace {

// Tensor-wise: float32 scales of one element. Row-wise: scale_a (m, 1), scale_b (1, n), contiguous.
void checkScales(const at::Tensor& a, const at::Tensor& c, const at::Tensor& sa, const at::Tensor& sb) {
  bool float8 = at::isFloat8Type(a.scalar_type()) && at::isFloat8Type(c.scalar_type());
  bool f32 = sa.scalar_type() == at::kFloat && sb.scalar_type() == at::kFloat;
  bool tensorWise = sa.numel() == 1 && sb.numel() == 1;
  bool rowWise = sa.dim() == 2 && sb.dim() == 2 && sa.size(0) == a.size(0) && sa.size(1) == 1 &&
                 sb.size(0) == 1 && sb.size(1) == c.size(1) && sa.is_contiguous() && sb.is_contiguous();
  TORCH_CHECK_VALUE(float8 && f32 && (tensorWise || rowWise),
                    "_scaled_mm: invalid scaling configuration: mat_a and mat_b must be float8 and the scales "
                    "float32, either one element each (tensor-wise) or scale_a (", a.size(0), ", 1) and scale_b (1, ",
                    c.size(1), "), contiguous (row-wise); got mat_a ", a.scalar_type(), ", mat_b ", c.scalar_type(),
                    ", scale_a ", sa.scalar_type(), sa.sizes(), ", scale_b ", sb.scalar_type(), sb.sizes());
}

at::Tensor& scaledMmOut(const at::Tensor& a, const at::Tensor& c, const at::Tensor& sa, const at::Tensor& sb,
                        const std::optional<at::Tensor>& biasArg, const std::optional<at::Tensor>& scaleResultArg,
                        std::optional<at::ScalarType> outDtype, bool /*use_fast_accum: always exact float32*/,
                        at::Tensor& out) {
  TORCH_CHECK(a.dim() == 2, "_scaled_mm: mat_a must be a matrix, got ", a.dim(), "-D");
  TORCH_CHECK(c.dim() == 2, "_scaled_mm: mat_b must be a matrix, got ", c.dim(), "-D");
  TORCH_CHECK(a.size(1) == c.size(0), "_scaled_mm: mat_a and mat_b shapes cannot be multiplied (", a.size(0), "x",
              a.size(1), " and ", c.size(0), "x", c.size(1), ")");
  checkScales(a, c, sa, sb);
  at::ScalarType resultType = outDtype.value_or(a.scalar_type());
  const at::Tensor* bias = biasArg.has_value() && biasArg->defined() ? &*biasArg : nullptr;
  if (bias) {
    TORCH_CHECK(bias->dim() == 1 && bias->size(0) == c.size(1), "_scaled_mm: bias must be of size ", c.size(1),
                ", got ", bias->sizes());
    TORCH_CHECK(!at::isFloat8Type(bias->scalar_type()),
                "_scaled_mm: a float8 bias is not supported (as on CPU): give it in float32, bfloat16 or float16");
  }
  // The result scale divides only a float8 e4m3fn / e5m2 result, as on CPU.
  bool scalesResult = scaleResultArg.has_value() && scaleResultArg->defined() &&
                      (resultType == at::kFloat8_e4m3fn || resultType == at::kFloat8_e5m2);
  if (scalesResult)
    TORCH_CHECK(scaleResultArg->numel() == 1, "_scaled_mm: scale_result must have one element, got ",
                scaleResultArg->sizes());
  TORCH_CHECK(out.scalar_type() == resultType, "_scaled_mm: expected out of dtype ", resultType, ", got ",
              out.scalar_type());
  at::native::resize_output(out, {a.size(0), c.size(1)});
  if (out.numel() == 0) return out;
  Op op = TPU_OP("aten::_scaled_mm");
  op.in(a).in(c).in(sa).in(sb).attr(bias != nullptr).attr(scalesResult);
  if (bias) op.in(*bias);
  if (scalesResult) op.in(*scaleResultArg);
  op.out(out).run([&](hlo::Builder& b, Values in, Values) {
    const hlo::Value* biasV = bias ? &in[4] : nullptr;
    const hlo::Value* resultScale = scalesResult ? &in[bias ? 5 : 4] : nullptr;
    return ValueList{lowering::scaledProduct(b, in[0], in[1], in[2], in[3], biasV, resultScale)};
  });
  return out;
}

at::Tensor scaledMm(const at::Tensor& a, const at::Tensor& c, const at::Tensor& sa, const at::Tensor& sb,
                    const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& scaleResult,
                    std::optional<at::ScalarType> outDtype, bool fastAccum) {
  at::Tensor out = at::empty({0}, a.options().dtype(outDtype.value_or(a.scalar_type())));
  return scaledMmOut(a, c, sa, sb, bias, scaleResult, outDtype, fastAccum, out);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_scaled_mm", scaledMm);
  m.impl("_scaled_mm.out", scaledMmOut);
}

}  // namespace
}  // namespace tpu::aten
