#include "OpRunner.h"

#include <ATen/Context.h>
#include <ATen/MemoryOverlap.h>

#include <cstring>
#include <string_view>

#include "DeviceAllocator.h"

namespace tpu::aten {

hlo::DType toHlo(c10::ScalarType t) {
  switch (t) {
    case c10::kBool: return hlo::DType::Pred;
    case c10::kByte: return hlo::DType::U8;
    case c10::kChar: return hlo::DType::S8;
    case c10::kShort: return hlo::DType::S16;
    case c10::kInt: return hlo::DType::S32;
    case c10::kLong: return hlo::DType::S64;
    case c10::kHalf: return hlo::DType::F16;
    case c10::kBFloat16: return hlo::DType::BF16;
    case c10::kFloat: return hlo::DType::F32;
    case c10::kDouble: return hlo::DType::F64;
    case c10::kComplexFloat: return hlo::DType::C64;
    case c10::kComplexDouble: return hlo::DType::C128;
    case c10::kFloat8_e4m3fn: return hlo::DType::F8E4M3FN;
    case c10::kFloat8_e5m2: return hlo::DType::F8E5M2;
    case c10::kFloat8_e4m3fnuz: return hlo::DType::F8E4M3FNUZ;
    case c10::kFloat8_e5m2fnuz: return hlo::DType::F8E5M2FNUZ;
    case c10::kFloat8_e8m0fnu: return hlo::DType::F8E8M0FNU;
    default:
      TORCH_CHECK_TYPE(false, "tpu: dtype ", t,
                       " is not supported on tpu (supported: bool, uint8, int8, int16, int32, int64, float16, "
                       "bfloat16, float32, float64, complex64, complex128, the float8 types); convert the tensor first, e.g. "
                       ".to(torch.float32)");
  }
}

runtime::TensorArg tensorArg(const at::Tensor& t) {
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, "tpu: expected a tpu tensor, got one on ",
              t.device());
  runtime::TensorArg a;
  StorageRef ref = resolveStorage(t.storage());
  a.storage = ref.storage;
  a.view.dtype = toHlo(t.scalar_type());
  a.view.sizes.assign(t.sizes().begin(), t.sizes().end());
  a.view.strides.assign(t.strides().begin(), t.strides().end());
  a.view.offset = t.storage_offset();
  if (ref.byteOffset != 0) {  // a from_blob storage inside a tpu storage: views count from its start
    size_t item = t.element_size();
    TORCH_CHECK(ref.byteOffset % item == 0, "tpu: a tensor wrapping a tpu address ", ref.byteOffset,
                " bytes into a storage is not aligned to its ", item, "-byte elements");
    a.view.offset += static_cast<int64_t>(ref.byteOffset / item);
  }
  return a;
}

hlo::Precision dotPrecision() {
  // PyTorch's default "highest" means true float32 products; XLA would otherwise pick
  // one bf16 pass on TPU and TF32 on NVIDIA GPUs for float32 dots.
  switch (at::globalContext().float32MatmulPrecision()) {
    case at::Float32MatmulPrecision::HIGHEST: return hlo::Precision::Highest;
    case at::Float32MatmulPrecision::HIGH: return hlo::Precision::High;
    case at::Float32MatmulPrecision::MEDIUM: return hlo::Precision::Default;
  }
  return hlo::Precision::Highest;
}

runtime::HostOperand scalarOperand(const c10::Scalar& s, c10::ScalarType as) {
  hlo::DType t = toHlo(as);
  if (s.isBoolean()) return runtime::HostOperand::integer(t, s.toBool());
  if (s.isIntegral(false)) {
    int64_t v = s.toLong();
    return hlo::isFloat(t) ? runtime::HostOperand::scalar(t, static_cast<double>(v))
                           : runtime::HostOperand::integer(t, v);
  }
  if (hlo::isComplex(t)) {
    c10::complex<double> c = s.toComplexDouble();
    return runtime::HostOperand::complexScalar(t, c.real(), c.imag());
  }
  TORCH_CHECK(!s.isComplex(), "tpu: a complex scalar cannot be an operand of dtype ", as,
              " (the op's result type would be complex)");
  double v = s.toDouble();
  if (hlo::isFloat(t)) return runtime::HostOperand::scalar(t, v);
  if (t == hlo::DType::Pred) return runtime::HostOperand::integer(t, v != 0);
  return runtime::HostOperand::integer(t, static_cast<int64_t>(v));
}

Op& Op::out(const at::Tensor& t) {
  // Writing through a view whose elements alias each other is an error, as on CPU.
  at::assert_no_internal_overlap(t);
  call_.outputs.push_back(tensorArg(t));
  return *this;
}

namespace {
thread_local const IndexErrorScope* outermostIndexScope = nullptr;
}  // namespace

// The outermost scope wins: it is the op the user called.
IndexErrorScope::IndexErrorScope(const char* op, runtime::ErrorKind cpuError) : op_(op), cpuError_(cpuError) {
  if (!outermostIndexScope) outermostIndexScope = this;
}
IndexErrorScope::~IndexErrorScope() {
  if (outermostIndexScope == this) outermostIndexScope = nullptr;
}
const IndexErrorScope* IndexErrorScope::current() { return outermostIndexScope; }

Op& Op::checksIndices(runtime::ErrorKind cpuError) {
  call_.checksIndices = true;
  call_.indexError = cpuError;
  if (const IndexErrorScope* scope = IndexErrorScope::current()) {
    call_.indexError = scope->cpuError();
    call_.indexErrorOp = scope->op();
    // The error is a constant of the program: keep the composite's programs apart from the plain op's.
    attr(static_cast<int64_t>(std::hash<std::string_view>{}(scope->op())));
    attr(static_cast<int64_t>(scope->cpuError()));
  }
  return *this;
}

Op& Op::attrDouble(double v) {
  int64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  call_.attrs.push_back(bits);
  return *this;
}

}  // namespace tpu::aten
