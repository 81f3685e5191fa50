// Copies between CPU and tpu and within tpu, item(), fill_ and zero_.
#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <torch/library.h>

#include "DeviceAllocator.h"
#include "OpRunner.h"

namespace tpu::aten {
namespace {

bool coversStorage(const at::Tensor& t) {
  return t.storage_offset() == 0 && t.is_contiguous() && t.nbytes() == t.storage().nbytes();
}

// dst (tpu) <- src (tpu), converting dtype and broadcasting as copy_ does.
void deviceCopy(const at::Tensor& dst, const at::Tensor& src) {
  TPU_OP("aten::copy_").in(src).out(dst).run([&](hlo::Builder& b, Values in, Values) {
    return ValueList{b.broadcast(b.convert(in[0], toHlo(dst.scalar_type())), dst.sizes().vec())};
  });
}

void uploadInto(const at::Tensor& dst, const at::Tensor& src) {
  // Host-side conversion and broadcast, then one transfer into a dense buffer.
  at::Tensor host = src.to(dst.scalar_type()).expand(dst.sizes()).contiguous();
  if (coversStorage(dst)) {
    runtime::Executor::get().upload(*deviceStorage(dst.storage()), host.data_ptr(), toHlo(dst.scalar_type()));
    return;
  }
  at::Tensor staging = at::empty(dst.sizes(), dst.options().memory_format(c10::MemoryFormat::Contiguous));
  runtime::Executor::get().upload(*deviceStorage(staging.storage()), host.data_ptr(), toHlo(dst.scalar_type()));
  deviceCopy(dst, staging);
}

at::Tensor downloadDense(const at::Tensor& src) {
  at::Tensor dense = coversStorage(src) ? src : src.contiguous();
  if (!coversStorage(dense)) dense = dense.clone(c10::MemoryFormat::Contiguous);
  at::Tensor host = at::empty(dense.sizes(), dense.options().device(c10::kCPU));
  if (host.numel() > 0) runtime::Executor::get().download(*deviceStorage(dense.storage()), host.data_ptr());
  return host;
}

// dst (tpu:j) <- src (tpu:i): convert on the source device into a dense buffer, which the
// plugin copies device to device; a partial or broadcast destination takes one more program.
void crossDeviceCopy(const at::Tensor& dst, const at::Tensor& src) {
  at::Tensor dense = src.to(dst.scalar_type()).contiguous();
  if (!coversStorage(dense)) dense = dense.clone(c10::MemoryFormat::Contiguous);
  if (coversStorage(dst) && dst.sizes() == dense.sizes()) {
    runtime::Executor::get().copyToDevice(*deviceStorage(dense.storage()), *deviceStorage(dst.storage()));
    return;
  }
  at::Tensor moved = at::empty(dense.sizes(), dense.options().device(dst.device()));
  runtime::Executor::get().copyToDevice(*deviceStorage(dense.storage()), *deviceStorage(moved.storage()));
  deviceCopy(dst, moved);
}

at::Tensor& copy(at::Tensor& self, const at::Tensor& src, bool nonBlocking) {
  if (self.numel() == 0) return self;
  if (self.is_same(src)) return self;
  at::assert_no_internal_overlap(self);
  bool selfTpu = self.device().type() == c10::DeviceType::PrivateUse1;
  bool srcTpu = src.device().type() == c10::DeviceType::PrivateUse1;
  if (selfTpu && srcTpu && self.device() == src.device()) {
    at::assert_no_partial_overlap(self, src);
    deviceCopy(self, src);
  } else if (selfTpu && srcTpu) {
    crossDeviceCopy(self, src);
  } else if (selfTpu) {
    TORCH_CHECK(src.device().is_cpu(), "tpu: cannot copy from ", src.device(), " to tpu; move it to cpu first");
    uploadInto(self, src);
  } else {
    TORCH_CHECK(self.device().is_cpu(), "tpu: cannot copy from tpu to ", self.device(), "; copy to cpu first");
    self.copy_(downloadDense(src));
  }
  return self;
}

at::Tensor copyFrom(const at::Tensor& self, const at::Tensor& dst, bool nonBlocking) {
  at::Tensor out = dst;
  copy(out, self, nonBlocking);
  return dst;
}

at::Tensor copyFromAndResize(const at::Tensor& self, const at::Tensor& dst) {
  at::Tensor out = dst;
  if (out.sizes() != self.sizes()) out.resize_(self.sizes());
  copy(out, self, false);
  return dst;
}

c10::Scalar localScalarDense(const at::Tensor& self) {
  return at::_local_scalar_dense(downloadDense(self));
}

at::Tensor& fill(at::Tensor& self, const c10::Scalar& value) {
  if (self.numel() == 0) return self;
  TPU_OP("aten::fill_").out(self).scalar(value, self.scalar_type()).run([&](hlo::Builder& b, Values, Values s) {
    return ValueList{b.broadcast(s[0], self.sizes().vec())};
  });
  return self;
}

at::Tensor& fillTensor(at::Tensor& self, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "fill_ only supports 0-dimension value tensor but got tensor with ", value.dim(),
              " dimensions.");
  if (value.device().is_cpu()) return fill(self, value.item());
  if (self.numel() == 0) return self;
  TPU_OP("aten::fill_.Tensor").in(value).out(self).run([&](hlo::Builder& b, Values in, Values) {
    return ValueList{b.broadcast(b.convert(in[0], toHlo(self.scalar_type())), self.sizes().vec())};
  });
  return self;
}

at::Tensor& zero(at::Tensor& self) { return fill(self, 0); }

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("copy_", copy);
  m.impl("_copy_from", copyFrom);
  m.impl("_copy_from_and_resize", copyFromAndResize);
  m.impl("_local_scalar_dense", localScalarDense);
  m.impl("fill_.Scalar", fill);
  m.impl("fill_.Tensor", fillTensor);
  m.impl("zero_", zero);
}

}  // namespace tpu::aten
