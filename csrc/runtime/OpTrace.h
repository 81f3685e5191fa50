#pragma once
// Tracing one OpCall into an HLO function: read its input views from the
// storages' flat values, run its lowering, write its outputs back into the
// storages' flat values. Strict mode traces one op per module; Fused mode
// traces many ops into one module. Where flat values and operands come from
// is the TraceContext's business.
#include <optional>

#include "FunctionRef.h"
#include "OpCall.h"

namespace tpu::runtime {

class TraceContext {
 public:
  virtual ~TraceContext() = default;
  // The storage's current flat value (1-D, any element type). `as` is the
  // element type a never-written storage should be materialised in (zeros).
  virtual hlo::Value storageValue(hlo::Builder& b, DeviceStorage* s, hlo::DType as) = 0;
  virtual void setStorageValue(DeviceStorage* s, hlo::Value flat) = 0;
  virtual hlo::Value operandValue(hlo::Builder& b, const HostOperand& o) = 0;
  // The offset of argument `arg` (inputs, then outputs) as a runtime value (an S64 scalar), or none to
  // bake it into the program. Fused graphs pass offsets that may move (ViewSpec.h offsetCanBeOperand).
  virtual std::optional<hlo::Value> viewOffset(hlo::Builder&, const TensorArg&, size_t /*arg*/, bool /*write*/) {
    return std::nullopt;
  }
};

struct TraceResult {
  std::vector<hlo::Value> inputs;   // the input views as read
  std::vector<hlo::Value> outputs;  // the output values as written (view shape and dtype)
  std::optional<hlo::Value> indexFlag;  // call.checksIndices: pred "some index out of range"
};

TraceResult traceOp(hlo::Builder& b, TraceContext& ctx, const OpCall& call, FunctionRef<BuildFn> build);

// The device's out-of-range flag (S32 scalar) after an index op: sticky, it keeps
// the code of the first op that saw an index out of range.
hlo::Value chainIndexFlag(hlo::Builder& b, hlo::Value oldFlag, hlo::Value outOfRange, int32_t code);

}  // namespace tpu::runtime
