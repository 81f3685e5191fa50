#include "ForeignKernels.h"

#include <ATen/ATen.h>

#include <deque>
#include <mutex>

#include "OpRunner.h"
#include "csrc/lowering/Foreign.h"
#include "csrc/runtime/ForeignFunctions.h"

namespace tpu::aten {
namespace {

struct Entry {
  const runtime::ForeignFunction* fn;
  ForeignSignature outputs;
};

std::mutex mu;
std::deque<Entry>& entries() {  // indexed by the runtime id; references survive growth
  static std::deque<Entry> e;
  return e;
}

const Entry& entry(int64_t id) {
  std::lock_guard<std::mutex> lock(mu);
  TORCH_CHECK_INDEX(id >= 0 && static_cast<size_t>(id) < entries().size(), "torch_tpu: no foreign function ",
                    id);
  return entries()[static_cast<size_t>(id)];
}

int64_t foreignOpId() {
  static const int64_t id = runtime::newOpId();
  return id;
}

}  // namespace

int64_t registerForeign(const std::string& name, const std::string& symbol, const std::string& text,
                        const ForeignSignature& inputs, const ForeignSignature& outputs) {
  TORCH_CHECK_VALUE(inputs.dtypes.size() == inputs.shapes.size() && outputs.dtypes.size() == outputs.shapes.size(),
                    name, ": one dtype per shape expected");
  TORCH_CHECK_VALUE(!outputs.dtypes.empty(), name, ": a foreign function must return at least one array");
  runtime::ForeignFunction f{name, symbol, text, {}, {}};
  for (size_t i = 0; i < inputs.dtypes.size(); ++i) f.inputs.push_back({toHlo(inputs.dtypes[i]), inputs.shapes[i]});
  for (size_t i = 0; i < outputs.dtypes.size(); ++i)
    f.outputs.push_back({toHlo(outputs.dtypes[i]), outputs.shapes[i]});
  int64_t id;
  try {
    id = runtime::registerForeignFunction(std::move(f));
  } catch (const std::invalid_argument& e) {
    TORCH_CHECK_VALUE(false, e.what());
  }
  std::lock_guard<std::mutex> lock(mu);
  while (entries().size() <= static_cast<size_t>(id)) entries().push_back(Entry{nullptr, {}});
  entries()[static_cast<size_t>(id)] = Entry{&runtime::foreignFunction(id), outputs};
  return id;
}

std::vector<at::Tensor> runForeign(int64_t id, const std::vector<at::Tensor>& inputs) {
  const Entry& e = entry(id);
  const runtime::ForeignFunction& f = *e.fn;
  TORCH_CHECK_VALUE(inputs.size() == f.inputs.size(), f.name, ": expected ", f.inputs.size(), " tensors, got ",
                    inputs.size());
  c10::Device device(c10::DeviceType::PrivateUse1, -1);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const at::Tensor& t = inputs[i];
    TORCH_CHECK_VALUE(t.defined() && t.device().is_privateuseone(), f.name, ": argument ", i,
                      " must be a tpu tensor");
    TORCH_CHECK_TYPE(toHlo(t.scalar_type()) == f.inputs[i].dtype && t.sizes().vec() == f.inputs[i].shape, f.name,
                     ": argument ", i, " (", t.scalar_type(), t.sizes(),
                     ") does not match the signature this function was exported for");
    if (i == 0) device = t.device();
  }
  if (device.index() < 0) device = c10::Device(c10::DeviceType::PrivateUse1, c10::impl::getDeviceGuardImpl(
                                                                                  c10::DeviceType::PrivateUse1)
                                                                                  ->getDevice()
                                                                                  .index());
  std::vector<at::Tensor> outs;
  outs.reserve(f.outputs.size());
  for (size_t i = 0; i < f.outputs.size(); ++i)
    outs.push_back(at::empty(e.outputs.shapes[i], at::TensorOptions().dtype(e.outputs.dtypes[i]).device(device)));
  bool empty = false;
  for (const auto& o : outs) empty |= o.numel() == 0;
  for (const auto& t : inputs) empty |= t.numel() == 0;
  TORCH_CHECK_NOT_IMPLEMENTED(!empty, f.name, ": foreign functions on empty tensors are not supported");
  Op op(f.name.c_str(), foreignOpId());
  op.attr(id);
  for (const auto& t : inputs) op.in(t);
  for (const auto& o : outs) op.out(o);
  op.run([&](hlo::Builder& b, Values in, Values) { return lowering::foreignCall(b, id, f, in); });
  return outs;
}

}  // namespace tpu::aten
