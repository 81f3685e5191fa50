#include "Buffer.h"

#include <utility>

#include "Error.h"

namespace tpu::pjrt {

Buffer::~Buffer() {
  if (!buf_) return;  // handed to another Buffer (takeHandle)
  // PJRT frees the memory once in-flight programs that use it have finished.
  auto args = TPU_PJRT_ARGS(PJRT_Buffer_Destroy_Args);
  args.buffer = buf_;
  ignore(api_, api_->PJRT_Buffer_Destroy(&args));
}

std::unique_ptr<Buffer> Buffer::takeHandle() {
  return std::make_unique<Buffer>(api_, std::exchange(buf_, nullptr));
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

void Buffer::awaitReady() const { readyEvent().await(); }

Event Buffer::readyEvent() const {
  auto args = TPU_PJRT_ARGS(PJRT_Buffer_ReadyEvent_Args);
  args.buffer = buf_;
  check(api_, api_->PJRT_Buffer_ReadyEvent(&args), "PJRT_Buffer_ReadyEvent");
  return Event(api_, args.event);
}

PJRT_Device* Buffer::device() const {
  auto args = TPU_PJRT_ARGS(PJRT_Buffer_Device_Args);
  args.buffer = buf_;
  check(api_, api_->PJRT_Buffer_Device(&args), "PJRT_Buffer_Device");
  return args.device;
}

std::unique_ptr<Buffer> Buffer::copyToDevice(PJRT_Device* dst) const {
  auto args = TPU_PJRT_ARGS(PJRT_Buffer_CopyToDevice_Args);
  args.buffer = buf_;
  args.dst_device = dst;
  check(api_, api_->PJRT_Buffer_CopyToDevice(&args), "PJRT_Buffer_CopyToDevice");
  return std::make_unique<Buffer>(api_, args.dst_buffer);
}

}  // namespace tpu::pjrt
