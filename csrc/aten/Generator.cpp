#include "Generator.h"

#include <ATen/Functions.h>
#include <c10/core/TensorImpl.h>

#include <cstring>
#include <mutex>
#include <random>

#include "Guard.h"

namespace tpu::aten {

TpuGenerator::TpuGenerator(c10::DeviceIndex device, uint64_t seed)
    : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, device),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      seed_(seed) {}

void TpuGenerator::set_current_seed(uint64_t seed) {
  seed_ = seed;
  offset_ = 0;
}

uint64_t TpuGenerator::seed() {
  uint64_t s = std::random_device{}() | (static_cast<uint64_t>(std::random_device{}()) << 32);
  set_current_seed(s);
  return s;
}

void TpuGenerator::set_state(const c10::TensorImpl& state) {
  TORCH_CHECK(state.dtype() == caffe2::TypeMeta::Make<uint8_t>() && state.numel() == 16 &&
                  state.device().is_cpu(),
              "tpu: RNG state must be a CPU uint8 tensor of 16 bytes (as returned by get_rng_state)");
  const auto* data = static_cast<const uint8_t*>(state.data());
  std::memcpy(&seed_, data, 8);
  std::memcpy(&offset_, data + 8, 8);
}

c10::intrusive_ptr<c10::TensorImpl> TpuGenerator::get_state() const {
  at::Tensor state = at::empty({16}, at::TensorOptions().dtype(at::kByte));
  std::memcpy(state.data_ptr<uint8_t>(), &seed_, 8);
  std::memcpy(state.data_ptr<uint8_t>() + 8, &offset_, 8);
  return state.getIntrusivePtr();
}

uint64_t TpuGenerator::reserve(uint64_t count) {
  uint64_t at = offset_;
  // Keep offsets 4-aligned: each Philox block yields four 32-bit words.
  offset_ += (count + 3) / 4 * 4;
  return at;
}

TpuGenerator* TpuGenerator::clone_impl() const {
  auto* g = new TpuGenerator(device().index(), seed_);
  g->offset_ = offset_;
  return g;
}

const at::Generator& defaultGenerator(c10::DeviceIndex device) {
  static std::once_flag once;
  static std::vector<at::Generator> generators;
  std::call_once(once, [] {
    int n = std::max(deviceCount(), 1);
    for (int i = 0; i < n; ++i) generators.push_back(at::make_generator<TpuGenerator>(static_cast<c10::DeviceIndex>(i)));
  });
  if (device < 0) device = static_cast<c10::DeviceIndex>(currentDevice());
  TORCH_CHECK(device < static_cast<int>(generators.size()), "tpu: invalid device index ", int(device));
  return generators[device];
}

TpuGenerator* generatorFor(const std::optional<at::Generator>& gen, c10::DeviceIndex device) {
  const at::Generator& g = gen.has_value() && gen->defined() ? *gen : defaultGenerator(device);
  TORCH_CHECK(g.device().type() == c10::DeviceType::PrivateUse1, "tpu: expected a tpu generator, got one for ",
              g.device());
  return at::check_generator<TpuGenerator>(g);
}


}  // namespace tpu::aten
