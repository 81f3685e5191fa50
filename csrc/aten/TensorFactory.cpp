// Allocation, resizing, storage re-seating and the view kernels: everything
// that only touches metadata (views share storage with their base, §3).
#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TensorFactories.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/unfold_native.h>
#include <torch/library.h>

#include "DeviceAllocator.h"
#include "Guard.h"
#include "OpRunner.h"
#include "csrc/runtime/Runtime.h"

namespace tpu::aten {
namespace {

c10::DispatchKeySet tpuKeys() { return c10::DispatchKeySet(c10::DispatchKey::PrivateUse1); }

// Makes sure the device exists (and the runtime started) before allocating.
void checkDevice(std::optional<c10::Device> device) {
  int index = device && device->has_index() ? device->index() : currentDevice();
  int count = deviceCount();
  if (count == 0) runtime::Runtime::get();  // raises the "no plugin" error
  TORCH_CHECK_INDEX(index < count, "tpu: device index ", index, " is out of range (", count, " tpu devices)");
}

at::Tensor emptyMemoryFormat(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                             std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                             std::optional<bool> pinMemory, std::optional<c10::MemoryFormat> memoryFormat) {
  checkDevice(device);
  c10::DeviceGuard guard(device.value_or(c10::Device(c10::DeviceType::PrivateUse1, currentDevice())));
  auto scalarType = c10::dtype_or_default(dtype);
  toHlo(scalarType);
  return at::detail::empty_generic(size, &DeviceAllocator::get(), tpuKeys(), scalarType, memoryFormat);
}

at::Tensor emptyStrided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<c10::ScalarType> dtype,
                        std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                        std::optional<bool> pinMemory) {
  checkDevice(device);
  c10::DeviceGuard guard(device.value_or(c10::Device(c10::DeviceType::PrivateUse1, currentDevice())));
  auto scalarType = c10::dtype_or_default(dtype);
  toHlo(scalarType);
  return at::detail::empty_strided_generic(size, stride, &DeviceAllocator::get(), tpuKeys(), scalarType);
}

const at::Tensor& resize(const at::Tensor& self, c10::SymIntArrayRef symSize,
                         std::optional<c10::MemoryFormat> memoryFormat) {
  auto size = C10_AS_INTARRAYREF_SLOW(symSize);
  auto* impl = self.unsafeGetTensorImpl();
  int64_t itemsize = static_cast<int64_t>(self.dtype().itemsize());
  impl->set_sizes_contiguous(size);
  auto format = memoryFormat.value_or(c10::MemoryFormat::Contiguous);
  if (format != c10::MemoryFormat::Preserve) impl->empty_tensor_restride(format);
  size_t needed =
      at::detail::computeStorageNbytes(self.sizes(), self.strides(), itemsize, self.storage_offset());
  if (needed > self.storage().nbytes()) resizeStorageBytes(self.storage(), needed);
  return self;
}

at::Tensor& setStorage(at::Tensor& self, c10::Storage source, int64_t offset, c10::IntArrayRef size,
                       c10::IntArrayRef stride) {
  TORCH_CHECK(source.device().type() == c10::DeviceType::PrivateUse1,
              "tpu: set_ expects a tpu storage, got one on ", source.device());
  at::native::checkSetStorage(self, source, offset, size, stride);
  self.unsafeGetTensorImpl()->set_storage_offset(offset);
  at::OptionalIntArrayRef strideOpt = stride.data() != nullptr ? at::OptionalIntArrayRef(stride) : std::nullopt;
  at::native::resize_impl_cpu_(self.unsafeGetTensorImpl(), size, strideOpt, /*resize_storage=*/false);
  size_t required = at::detail::computeStorageNbytes(self.sizes(), self.strides(), self.dtype().itemsize(),
                                                     self.storage_offset())
                        ;
  if (self.numel() > 0 && required > self.storage().nbytes()) resizeStorageBytes(self.storage(), required);
  return self;
}

at::Tensor& setSourceStorageOffset(at::Tensor& self, c10::Storage source, int64_t offset, c10::IntArrayRef size,
                                   c10::IntArrayRef stride) {
  return setStorage(self, std::move(source), offset, size, stride);
}

at::Tensor& setSourceStorage(at::Tensor& self, c10::Storage source) {
  int64_t n = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  return setStorage(self, std::move(source), 0, {n}, {});
}

at::Tensor& setSourceTensor(at::Tensor& self, const at::Tensor& source) {
  if (self.is_same(source)) return self;
  return setStorage(self, source.storage(), source.storage_offset(), source.sizes(), source.strides());
}

at::Tensor& setEmpty(at::Tensor& self) {
  c10::Storage storage(c10::Storage::use_byte_size_t(), size_t{0},
                       DeviceAllocator::get().allocateOn(0, self.device().index()), &DeviceAllocator::get(), true);
  return setStorage(self, storage, 0, {0}, {});
}

at::Tensor asStrided(const at::Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride,
                     std::optional<c10::SymInt> offset) {
  return at::native::as_strided_tensorimpl(self, C10_AS_INTARRAYREF_SLOW(size), C10_AS_INTARRAYREF_SLOW(stride),
                                           offset ? std::optional<int64_t>(offset->expect_int()) : std::nullopt);
}

at::Tensor view(const at::Tensor& self, c10::SymIntArrayRef size) {
  return at::native::view(self, C10_AS_INTARRAYREF_SLOW(size));
}

at::Tensor reshapeAlias(const at::Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  return at::native::_reshape_alias(self, C10_AS_INTARRAYREF_SLOW(size), C10_AS_INTARRAYREF_SLOW(stride));
}

// Autograd's zero gradients (e.g. sgn's backward for real inputs). CPU and CUDA return a ZeroTensor (no
// storage, a dispatch key of its own); here it is an ordinary tensor of zeros: the same values, and no op
// ever sees a storage that is not a device buffer.
at::Tensor efficientZeroTensor(c10::SymIntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pinMemory) {
  at::Tensor out = emptyMemoryFormat(C10_AS_INTARRAYREF_SLOW(size), dtype, layout, device, pinMemory, std::nullopt);
  return out.zero_();
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_efficientzerotensor", efficientZeroTensor);
  m.impl("empty.memory_format", emptyMemoryFormat);
  m.impl("empty_strided", emptyStrided);
  m.impl("resize_", resize);
  m.impl("set_.source_Storage_storage_offset", setSourceStorageOffset);
  m.impl("set_.source_Storage", setSourceStorage);
  m.impl("set_.source_Tensor", setSourceTensor);
  m.impl("set_", setEmpty);
  m.impl("as_strided", asStrided);
  m.impl("view", view);
  m.impl("_reshape_alias", reshapeAlias);
  m.impl("unfold", at::native::unfold);
}

}  // namespace tpu::aten
