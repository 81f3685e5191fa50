#include "OpTrace.h"

#include <stdexcept>
#include <string>

namespace tpu::runtime {

using hlo::Value;

namespace {

Value flatAs(hlo::Builder& b, TraceContext& ctx, const OpCall& call, DeviceStorage* s, hlo::DType as) {
  if (s->nbytes % hlo::byteWidth(as) != 0)
    throw std::runtime_error(std::string(call.name) + ": a storage of " + std::to_string(s->nbytes) +
                             " bytes cannot be viewed as elements of " + std::to_string(hlo::byteWidth(as)) +
                             " bytes on tpu");
  return reinterpretFlat(b, ctx.storageValue(b, s, as), as);
}

}  // namespace

TraceResult traceOp(hlo::Builder& b, TraceContext& ctx, const OpCall& call, FunctionRef<BuildFn> build) {
  TraceResult traced;
  // Every input is read before any output is written, as for a CPU kernel.
  std::vector<Value>& inputs = traced.inputs;
  inputs.reserve(call.inputs.size());
  for (size_t j = 0; j < call.inputs.size(); ++j) {
    const TensorArg& a = call.inputs[j];
    Value flat = flatAs(b, ctx, call, a.storage, a.view.dtype);
    std::optional<Value> offset = ctx.viewOffset(b, a, j, /*write=*/false);
    Value in = readView(b, flat, a.view, offset ? &*offset : nullptr);
    // float8 is a storage format: every op computes in float32 and rounds its result to the output's
    // format, as CPU does for the float8 ops it implements.
    inputs.push_back(hlo::isFloat8(in.dtype()) ? b.convert(in, hlo::DType::F32) : in);
  }
  std::vector<Value> operands;
  operands.reserve(call.operands.size());
  for (const HostOperand& o : call.operands) operands.push_back(ctx.operandValue(b, o));
  std::vector<Value> results;
  try {
    results = build(b, inputs, operands);
  } catch (const std::logic_error& e) {  // a lowering refusing its operands (complex max, ...): name the op
    throw std::runtime_error(std::string(call.name) + ": " + e.what());
  }
  size_t expected = call.outputs.size() + (call.checksIndices ? 1 : 0);
  if (results.size() != expected)
    throw std::logic_error(std::string(call.name) + ": lowering returned " + std::to_string(results.size()) +
                           " results for " + std::to_string(expected) + " (outputs" +
                           (call.checksIndices ? " + out-of-range flag)" : ")"));
  if (call.checksIndices) traced.indexFlag = results.back();
  for (size_t j = 0; j < call.outputs.size(); ++j) {
    const TensorArg& out = call.outputs[j];
    const ViewSpec& v = out.view;
    Value r = b.convert(results[j], v.dtype);
    if (r.shape() != v.sizes) {
      if (r.type.numel() != v.numel())
        throw std::logic_error(std::string(call.name) + ": lowering produced " + r.type.str() +
                               " for an output of " + std::to_string(v.numel()) + " elements");
      r = b.reshape(r, v.sizes);
    }
    traced.outputs.push_back(r);
    // An output covering its whole storage replaces it without reading it.
    if (v.coversStorage(out.storage->nbytes)) ctx.setStorageValue(out.storage, b.reshape(r, {v.numel()}));
    else {
      Value flat = flatAs(b, ctx, call, out.storage, v.dtype);
      std::optional<Value> offset = ctx.viewOffset(b, out, call.inputs.size() + j, /*write=*/true);
      ctx.setStorageValue(out.storage, writeView(b, flat, v, r, offset ? &*offset : nullptr));
    }
  }
  return traced;
}

Value chainIndexFlag(hlo::Builder& b, Value oldFlag, Value outOfRange, int32_t code) {
  Value oob = b.reshape(b.convert(outOfRange, hlo::DType::Pred), {});
  Value zero = b.constantInt(hlo::DType::S32, 0);
  Value mine = b.select(oob, b.constantInt(hlo::DType::S32, code), zero);
  return b.select(b.compare(hlo::Cmp::NE, oldFlag, zero), oldFlag, mine);
}

}  // namespace tpu::runtime
