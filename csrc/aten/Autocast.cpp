// torch.autocast("tpu"): the AutocastPrivateUse1 dispatch key, with CUDA's op lists (the AT_FORALL_* lists
// ATen exports so that other backends reuse them): matmuls and convolutions in the autocast dtype, numerically
// sensitive ops (softmax, norms, losses, pow, ...) in float32, mixed-dtype ops promoted to the widest type;
// every other op falls through. Without this, every op under autocast failed ("Could not run 'aten::linear'
// with arguments from the 'Autocasttpu' backend"), which broke accelerate's and transformers' bf16/fp16 modes.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace tpu::aten {
namespace {

using at::Scalar;
using at::ScalarType;
using at::Tensor;
using c10::IntArrayRef;

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define TPU_AUTOCAST_LOWER_PRECISION_FP(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define TPU_AUTOCAST_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define TPU_AUTOCAST_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define TPU_AUTOCAST_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_LOWER_PRECISION_FP(TPU_AUTOCAST_LOWER_PRECISION_FP)
  AT_FORALL_FP32(TPU_AUTOCAST_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(TPU_AUTOCAST_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
  AT_FORALL_PROMOTE(TPU_AUTOCAST_PROMOTE)
#undef TPU_AUTOCAST_LOWER_PRECISION_FP
#undef TPU_AUTOCAST_FP32
#undef TPU_AUTOCAST_FP32_SET_OPT_DTYPE
#undef TPU_AUTOCAST_PROMOTE
}

}  // namespace
}  // namespace tpu::aten
