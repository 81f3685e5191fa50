#pragma once
// Turns ATen tensors and scalars into a runtime::OpCall and runs it. Kernels
// describe their inputs, outputs and attributes, and give the lowering as a
// lambda that is only invoked when the signature is not cached yet.
#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>

#include <functional>
#include <initializer_list>
#include <string>

#include "csrc/runtime/Executor.h"

namespace tpu::aten {

hlo::DType toHlo(c10::ScalarType t);  // raises TypeError for dtypes tpu cannot hold
runtime::TensorArg tensorArg(const at::Tensor& t);
runtime::HostOperand scalarOperand(const c10::Scalar& s, c10::ScalarType as);
hlo::Precision dotPrecision();  // from torch.get_float32_matmul_precision()

// Inside a composite kernel (embedding_bag over index_select, take over index_select, ...): the
// index checks of the ops it runs report the composite's name and CPU's error type for it.
class IndexErrorScope {
 public:
  IndexErrorScope(const char* op, runtime::ErrorKind cpuError);
  ~IndexErrorScope();
  IndexErrorScope(const IndexErrorScope&) = delete;
  IndexErrorScope& operator=(const IndexErrorScope&) = delete;

  static const IndexErrorScope* current();
  const char* op() const { return op_; }
  runtime::ErrorKind cpuError() const { return cpuError_; }

 private:
  const char* op_;
  runtime::ErrorKind cpuError_;
};

class Op {
 public:
  Op(const char* name, int64_t id) {
    call_.name = name;
    call_.opId = id;
  }
  Op& in(const at::Tensor& t) {
    call_.inputs.push_back(tensorArg(t));
    return *this;
  }
  Op& out(const at::Tensor& t);
  // An output whose elements may alias each other (an expanded view): only for ops that write one value to
  // every element (fill_, zero_), where every alias receives the same value, as CPU allows.
  Op& outFilled(const at::Tensor& t) {
    call_.outputs.push_back(tensorArg(t));
    return *this;
  }
  // A Python/C++ scalar passed as a device operand of dtype `as`.
  Op& scalar(const c10::Scalar& s, c10::ScalarType as) {
    call_.operands.push_back(scalarOperand(s, as));
    return *this;
  }
  Op& operand(const runtime::HostOperand& o) {
    call_.operands.push_back(o);
    return *this;
  }
  // Facts the lowering depends on that are not in the views (dims, flags, ...).
  Op& attr(int64_t v) {
    call_.attrs.push_back(v);
    return *this;
  }
  Op& attrs(c10::IntArrayRef vs) {
    call_.attrs.push_back(static_cast<int64_t>(vs.size()));
    call_.attrs.insert(call_.attrs.end(), vs.begin(), vs.end());
    return *this;
  }
  Op& attrDouble(double v);
  // The lowering returns an extra last value: pred scalar "an index was out of range", raised as
  // `cpuError` (the type CPU raises for this op), or as the enclosing IndexErrorScope says.
  Op& checksIndices(runtime::ErrorKind cpuError = runtime::ErrorKind::Index);
  // The lowering's extra last value means "the assertion failed": raised as RuntimeError(message)
  // at the next synchronization (at the op in debug mode). `message` must outlive run(); its
  // hash keeps programs of different messages apart.
  Op& asserts(const std::string& message) {
    call_.checksIndices = true;
    call_.assertMessage = message.c_str();
    return attr(static_cast<int64_t>(std::hash<std::string>{}(message)));
  }

  template <class F>
  void run(F&& build) {
    call_.dotPrecision = dotPrecision();
    runtime::Executor::get().run(call_, runtime::FunctionRef<runtime::BuildFn>(build));
  }

 private:
  runtime::OpCall call_;
};

// An Op whose cache identity is this source location (one lowering lambda).
#define TPU_OP(name) \
  ::tpu::aten::Op(name, [] { static const int64_t id = ::tpu::runtime::newOpId(); return id; }())

using Values = std::span<const hlo::Value>;
using ValueList = std::vector<hlo::Value>;

}  // namespace tpu::aten
