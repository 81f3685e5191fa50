// Copies between CPU and tpu and within tpu, item(), fill_ and zero_.
#include <ATen/ATen.h>
#include <ATen/Dispatch_v2.h>
#include <ATen/MemoryOverlap.h>
#include <torch/library.h>

#include "DeviceAllocator.h"
#include "HostAllocator.h"
#include "OpRunner.h"

namespace tpu::aten {
namespace {

// t is dense and is its device storage's whole content (also for a from_blob
// storage wrapping a tpu address, which may start inside or end before it).
bool coversStorage(const at::Tensor& t) {
  if (t.storage_offset() != 0 || !t.is_contiguous()) return false;
  StorageRef ref = resolveStorage(t.storage());
  return ref.byteOffset == 0 && t.nbytes() == ref.storage->nbytes;
}

// dst (tpu) <- src (tpu), converting dtype and broadcasting as copy_ does. The conj and neg bits are
// view flags over unchanged memory: the stored values are conjugated (negated) where the bits differ.
// Complex into real keeps the real part, as on CPU.
void deviceCopy(const at::Tensor& dst, const at::Tensor& src) {
  bool conj = src.is_conj() != dst.is_conj(), neg = src.is_neg() != dst.is_neg();
  if (src.is_complex() && !dst.is_complex())
    TORCH_WARN_ONCE("Casting complex values to real discards the imaginary part");
  TPU_OP("aten::copy_").in(src).attr(conj).attr(neg).out(dst).run([&](hlo::Builder& b, Values in, Values) {
    hlo::Value v = in[0];
    if (conj && hlo::isComplex(v.dtype())) v = b.complex(b.realPart(v), b.neg(b.imagPart(v)));
    if (neg) v = b.neg(v);
    hlo::DType to = toHlo(dst.scalar_type());
    if (hlo::isComplex(v.dtype()) && !hlo::isComplex(to)) v = b.realPart(v);
    return ValueList{b.broadcast(b.convert(v, to), dst.sizes().vec())};
  });
}

// The memory a host tensor of dst's dtype must hold so that, read through dst's conj/neg bits, it shows
// src's values.
at::Tensor hostBitsFor(const at::Tensor& dst, const at::Tensor& src) {
  at::Tensor v = src.resolve_conj().resolve_neg();
  if (dst.is_conj()) v = v.conj().resolve_conj();
  if (dst.is_neg()) v = v.neg();
  return v;
}

// The owner of a host tensor's memory, held by an asynchronous transfer until it completes.
std::shared_ptr<void> keepAlive(const at::Tensor& host) { return std::make_shared<c10::Storage>(host.storage()); }

// Waits for pending asynchronous transfers that read or write `host`'s storage.
void awaitHost(const at::Tensor& host) {
  runtime::Executor::get().awaitHostRange(host.storage().data(), host.storage().nbytes());
}

// Storages up to this size take a partial upload as a whole-storage transfer and one merge program keyed by
// the storage's size, not the range's: serving copies a batch's first n rows into fixed per-request buffers
// (vLLM's copy_slice) with n changing every step, which would otherwise compile a program per n.
constexpr size_t kMergeUploadMaxBytes = 64 << 10;

// dst <- host (dense, dst's dtype and shape) when dst is a contiguous range of a small storage: the range's
// bounds are operands of the merge program. Returns false where it does not apply.
bool uploadIntoRange(const at::Tensor& dst, const at::Tensor& host, bool async) {
  if (!dst.is_contiguous() || dst.is_conj() || dst.is_neg()) return false;
  StorageRef ref = resolveStorage(dst.storage());
  const size_t nbytes = ref.storage->nbytes, item = dst.element_size();
  if (ref.byteOffset != 0 || nbytes > kMergeUploadMaxBytes || nbytes % item != 0) return false;
  const int64_t total = static_cast<int64_t>(nbytes / item), begin = dst.storage_offset(),
                end = begin + dst.numel();
  at::Tensor whole = at::zeros({total}, host.options());
  whole.narrow(0, begin, dst.numel()).copy_(host.reshape({-1}));
  at::Tensor staging = at::empty({total}, dst.options().memory_format(c10::MemoryFormat::Contiguous));
  auto& executor = runtime::Executor::get();
  runtime::DeviceStorage& storage = *deviceStorage(staging.storage());
  if (async) executor.uploadAsync(storage, whole.data_ptr(), toHlo(dst.scalar_type()), keepAlive(whole));
  else executor.upload(storage, whole.data_ptr(), toHlo(dst.scalar_type()));
  at::Tensor base = at::empty({0}, dst.options()).set_(dst.storage(), 0, {total}, {1});
  TPU_OP("aten::copy_.range").in(base).in(staging).scalar(begin, at::kLong).scalar(end, at::kLong).out(base).run(
      [&](hlo::Builder& b, Values in, Values bounds) {
        hlo::Value at = b.iota(hlo::Type{hlo::DType::S64, {total}}, 0);
        hlo::Value inside = b.binary("and", b.compare(hlo::Cmp::GE, at, b.broadcast(bounds[0], {total})),
                                     b.compare(hlo::Cmp::LT, at, b.broadcast(bounds[1], {total})));
        return ValueList{b.select(inside, in[1], in[0])};
      });
  return true;
}

// non_blocking from pinned memory returns once the transfer is started (the
// source is kept alive until the plugin is done with it); from pageable memory
// it stays synchronous, as on CUDA.
void uploadInto(const at::Tensor& dst, const at::Tensor& src, bool nonBlocking) {
  awaitHost(src);  // a pending non_blocking download into src must land before we read it
  bool async = nonBlocking && isPinnedHostPtr(src.data_ptr());
  // Host-side conversion and broadcast, then one transfer into a dense buffer.
  at::Tensor host = hostBitsFor(dst, src).to(dst.scalar_type()).expand(dst.sizes()).contiguous();
  auto& executor = runtime::Executor::get();
  auto put = [&](const at::Tensor& target) {
    runtime::DeviceStorage& storage = *deviceStorage(target.storage());
    if (async) executor.uploadAsync(storage, host.data_ptr(), toHlo(dst.scalar_type()), keepAlive(host));
    else executor.upload(storage, host.data_ptr(), toHlo(dst.scalar_type()));
  };
  if (coversStorage(dst)) {
    put(dst);
    return;
  }
  if (uploadIntoRange(dst, host, async)) return;
  at::Tensor staging = at::empty(dst.sizes(), dst.options().memory_format(c10::MemoryFormat::Contiguous));
  // The staging tensor holds dst's stored values and carries dst's bits, so the device copy keeps them.
  staging._set_conj(dst.is_conj());
  staging._set_neg(dst.is_neg());
  put(staging);
  deviceCopy(dst, staging);
}

// A dense tpu tensor with src's values that covers its whole storage.
at::Tensor denseOnDevice(const at::Tensor& src) {
  at::Tensor dense = coversStorage(src) ? src : src.contiguous();
  if (!coversStorage(dense)) dense = dense.clone(c10::MemoryFormat::Contiguous);
  return dense;
}

at::Tensor downloadDense(const at::Tensor& src) {
  at::Tensor dense = denseOnDevice(src);
  at::Tensor host = at::empty(dense.sizes(), dense.options().device(c10::kCPU));
  if (host.numel() > 0) runtime::Executor::get().download(*deviceStorage(dense.storage()), host.data_ptr());
  // The stored values, read through the same conj/neg bits as on the device.
  host._set_conj(dense.is_conj());
  host._set_neg(dense.is_neg());
  return host;
}

// tpu -> cpu. non_blocking into a dense pinned tensor of the same dtype and shape
// returns once the transfer is started; the data is there after
// torch.tpu.synchronize() (or any later copy through that memory), as on CUDA.
void downloadInto(at::Tensor& dst, const at::Tensor& src, bool nonBlocking) {
  awaitHost(dst);  // a pending non_blocking upload may still read dst
  bool async = nonBlocking && isPinnedHostPtr(dst.data_ptr()) && dst.is_contiguous() && !dst.is_neg() &&
               !dst.is_conj() && !src.is_neg() && !src.is_conj() && dst.scalar_type() == src.scalar_type() &&
               dst.sizes() == src.sizes();
  if (!async) {
    dst.copy_(downloadDense(src));
    return;
  }
  at::Tensor dense = denseOnDevice(src);
  runtime::Executor::get().downloadAsync(*deviceStorage(dense.storage()), dst.data_ptr(), keepAlive(dst));
}

// dst (tpu:j) <- src (tpu:i): convert on the source device into a dense buffer, which the
// plugin copies device to device; a partial or broadcast destination takes one more program.
void crossDeviceCopy(const at::Tensor& dst, const at::Tensor& src) {
  at::Tensor dense = denseOnDevice(src.resolve_conj().resolve_neg().to(dst.scalar_type()));
  if (coversStorage(dst) && dst.sizes() == dense.sizes() && !dst.is_conj() && !dst.is_neg()) {
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
    uploadInto(self, src, nonBlocking);
  } else {
    TORCH_CHECK(self.device().is_cpu(), "tpu: cannot copy from tpu to ", self.device(), "; copy to cpu first");
    downloadInto(self, src, nonBlocking);
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
  // A value the dtype cannot hold is an error, as on CPU (300 into int8, 1e5 into float16): Scalar::to checks.
  AT_DISPATCH_V2(self.scalar_type(), "fill_", AT_WRAP([&] { (void)value.to<scalar_t>(); }),
                 AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX), at::kBool, at::kHalf, at::kBFloat16,
                 AT_EXPAND(AT_FLOAT8_TYPES));
  if (self.numel() == 0) return self;
  TPU_OP("aten::fill_").outFilled(self).scalar(value, self.scalar_type()).run([&](hlo::Builder& b, Values, Values s) {
    return ValueList{b.broadcast(s[0], self.sizes().vec())};
  });
  return self;
}

at::Tensor& fillTensor(at::Tensor& self, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "fill_ only supports 0-dimension value tensor but got tensor with ", value.dim(),
              " dimensions.");
  at::assert_no_internal_overlap(self);  // as CPU: the Tensor overload refuses overlap, the Scalar one does not
  if (value.device().is_cpu()) return fill(self, value.item());
  if (self.numel() == 0) return self;
  TPU_OP("aten::fill_.Tensor").in(value).outFilled(self).run([&](hlo::Builder& b, Values in, Values) {
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
