// SHA-256 (FIPS 180-4), written out so that prefix-cache keys depend on no library version: every
// replica, on any machine, hashes the same bytes to the same digest.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace troupe::prefix {

class sha256 {
 public:
  using digest = std::array<uint8_t, 32>;

  sha256() noexcept { reset(); }
  void reset() noexcept;
  void update(std::span<const uint8_t> bytes) noexcept;
  void update(const void* data, size_t n) noexcept {
    update(std::span<const uint8_t>(static_cast<const uint8_t*>(data), n));
  }
  // Pads, returns the digest and leaves the object reset for reuse.
  digest finish() noexcept;

  static digest of(const void* data, size_t n) noexcept {
    sha256 h;
    h.update(data, n);
    return h.finish();
  }

 private:
  void compress(const uint8_t* block) noexcept;

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_;
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

}  // namespace troupe::prefix
