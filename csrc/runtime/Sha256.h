#pragma once
// SHA-256 (FIPS 180-4), torch-free: the compile cache's key and entry checksum.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tpu::runtime {

class Sha256 {
 public:
  using Digest = std::array<uint8_t, 32>;

  Sha256();
  Sha256& update(const void* data, size_t n);
  Sha256& update(std::string_view s) { return update(s.data(), s.size()); }
  // Feeds the length (8 bytes, little-endian) and then the bytes: fields hashed
  // one after another cannot run into each other ("ab","c" != "a","bc").
  Sha256& field(std::string_view s);
  // The digest; the object must not be updated afterwards.
  Digest finish();

  static Digest hash(std::string_view s) { return Sha256().update(s).finish(); }
  static std::string hex(const Digest& d);

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t used_ = 0;
  uint64_t total_ = 0;
};

}  // namespace tpu::runtime
