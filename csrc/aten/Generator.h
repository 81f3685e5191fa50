#pragma once
// The tpu random generator: a (seed, offset) pair, as for counter-based
// generators. Each random op passes both to the device as runtime operands
// (so a new seed never recompiles) and advances the offset.
#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

namespace tpu::aten {

class TpuGenerator final : public c10::GeneratorImpl {
 public:
  explicit TpuGenerator(c10::DeviceIndex device, uint64_t seed = c10::default_rng_seed_val);
  void set_current_seed(uint64_t seed) override;
  void set_offset(uint64_t offset) override { offset_ = offset; }
  uint64_t get_offset() const override { return offset_; }
  uint64_t current_seed() const override { return seed_; }
  uint64_t seed() override;
  void set_state(const c10::TensorImpl& state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

  // Reserves `count` random values: returns the offset to use, advances past them.
  uint64_t reserve(uint64_t count);

 private:
  TpuGenerator* clone_impl() const override;
  uint64_t seed_;
  uint64_t offset_ = 0;
};

const at::Generator& defaultGenerator(c10::DeviceIndex device);
// The generator an op should use: `gen` if given, else the device default.
TpuGenerator* generatorFor(const std::optional<at::Generator>& gen, c10::DeviceIndex device);

}  // namespace tpu::aten
