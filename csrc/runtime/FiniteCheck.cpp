#include "FiniteCheck.h"

#include "CompileCache.h"
#include "Runtime.h"
#include "csrc/hlo/Builder.h"

namespace tpu::runtime {

hlo::Value allFinite(hlo::Builder& b, const std::vector<hlo::Value>& values) {
  hlo::Value acc = b.constantInt(hlo::DType::Pred, 1);
  for (const hlo::Value& v : values) {
    hlo::Value fin = b.isFinite(b.reshape(v, {v.type.numel()}));
    hlo::Value init = b.constantInt(hlo::DType::Pred, 1);
    hlo::Value all = b.reduce({&fin, 1}, {&init, 1}, {0}, [](hlo::Builder& r, std::span<const hlo::Value> a) {
      return std::vector<hlo::Value>{r.binary("and", a[0], a[1])};
    })[0];
    acc = b.binary("and", acc, all);
  }
  return acc;
}

bool FiniteCheck::allFinite(const DeviceStorage& s) {
  if (!s.buffer) return true;
  int64_t n = s.elemCount();
  std::shared_ptr<pjrt::Executable> exe;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& slot = programs_[{static_cast<int>(s.elem), n}];
    if (!slot) {
      hlo::Builder b;
      hlo::Value all = runtime::allFinite(b, {b.parameter(hlo::Type{s.elem, {n}})});
      b.ret({&all, 1});
      slot = compileWithCache(Runtime::get().client(), b.module(), pjrt::CompileOptions{}, "debug finite check").exe;
      ++loaded_;
    }
    exe = slot;
  }
  std::vector<std::unique_ptr<pjrt::Buffer>> out =
      exe->execute({s.buffer->raw()}, Runtime::get().client().devices().at(s.device));
  uint8_t ok = 0;
  out.at(0)->toHost(&ok, 1).await();
  return ok != 0;
}

size_t FiniteCheck::size() {
  std::lock_guard<std::mutex> lock(mutex_);
  return programs_.size();
}

void FiniteCheck::shed() {
  std::lock_guard<std::mutex> lock(mutex_);
  programs_.clear();
}

bool FiniteCheck::knownFinite(DeviceStorage& s) {
  if (!s.buffer) return true;
  if (!s.finite.owner_before(s.buffer) && !s.buffer.owner_before(s.finite)) return true;
  if (!allFinite(s)) return false;
  markFinite(s);
  return true;
}

}  // namespace tpu::runtime
