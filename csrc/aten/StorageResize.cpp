#include <algorithm>

#include "DeviceAllocator.h"
#include "OpRunner.h"

namespace tpu::aten {

void resizeStorageBytes(const c10::Storage& storage, size_t nbytes) {
  TORCH_CHECK(storage.resizable(), "Trying to resize storage that is not resizable");
  runtime::DeviceStorage* old = deviceStorage(storage);
  if (old->nbytes == nbytes) return;
  // On the old storage's device, whatever the current device is: stats and frees must
  // land on the device the bytes live on.
  c10::DataPtr fresh = DeviceAllocator::get().allocateOn(nbytes, old->device);
  auto* resized = static_cast<runtime::DeviceStorage*>(fresh.get_context());
  int64_t kept = static_cast<int64_t>(std::min(old->nbytes, nbytes));
  if ((old->buffer || old->inGraph) && kept > 0) {
    runtime::OpCall call;
    call.name = "tpu::resize_storage";
    static const int64_t id = runtime::newOpId();
    call.opId = id;
    call.inputs.push_back({old, {hlo::DType::U8, {kept}, {1}, 0}});
    call.outputs.push_back({resized, {hlo::DType::U8, {static_cast<int64_t>(nbytes)}, {1}, 0}});
    auto build = [&](hlo::Builder& b, Values in, Values) {
      return ValueList{b.pad(in[0], b.constantInt(hlo::DType::U8, 0), {0},
                             {static_cast<int64_t>(nbytes) - kept}, {0})};
    };
    runtime::Executor::get().run(call, build);
  }
  const_cast<c10::Storage&>(storage).set_data_ptr_noswap(std::move(fresh));
  const_cast<c10::Storage&>(storage).set_nbytes(nbytes);
}

}  // namespace tpu::aten
