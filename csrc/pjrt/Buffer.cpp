#include "Buffer.h"

#include "Error.h"

namespace tpu::pjrt {

Buffer::~Buffer() {
  // PJRT frees the memory once in-flight programs that use it have finished.
  auto args = TPU_PJRT_ARGS(PJRT_Buffer_Destroy_Args);
  args.buffer = buf_;
  ignore(api_, api_->PJRT_Buffer_Destroy(&args));
}

std::vector<int64_t> Buffer::dims() const {
  auto args = TPU_PJRT_ARGS(PJRT_Buffer_Dimensions_Args);
  args.buffer = buf_;
  check(api_, api_->PJRT_Buffer_Dimensions(&args), "PJRT_Buffer_Dimensions");
  return std::vector<int64_t>(args.dims, args.dims + args.num_dims);
}

size_t Buffer::onDeviceBytes() const {
  auto args = TPU_PJRT_ARGS(PJRT_Buffer_OnDeviceSizeInBytes_Args);
  args.buffer = buf_;
  check(api_, api_->PJRT_Buffer_OnDeviceSizeInBytes(&args), "PJRT_Buffer_OnDeviceSizeInBytes");
  return args.on_device_size_in_bytes;
}

Event Buffer::toHost(void* dst, size_t bytes) const {
  auto args = TPU_PJRT_ARGS(PJRT_Buffer_ToHostBuffer_Args);
  args.src = buf_;
  args.dst = dst;
  args.dst_size = bytes;
  check(api_, api_->PJRT_Buffer_ToHostBuffer(&args), "PJRT_Buffer_ToHostBuffer");
  return Event(api_, args.event);
}

void Buffer::awaitReady() const {
  auto args = TPU_PJRT_ARGS(PJRT_Buffer_ReadyEvent_Args);
  args.buffer = buf_;
  check(api_, api_->PJRT_Buffer_ReadyEvent(&args), "PJRT_Buffer_ReadyEvent");
  Event(api_, args.event).await();
}

}  // namespace tpu::pjrt
