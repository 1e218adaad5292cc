// FNV-1a 64: the fixed, seedless hash behind the identities replicas must agree on (the model
// fingerprint, a LoRA adapter's identity), written byte by byte so every host gets the same value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace troupe {

// FNV-1a 64 (offset basis 0xcbf29ce484222325, prime 0x100000001b3): tiny, fixed, no seed.
// Byte at a time: what it hashes is KB (a fingerprint) to a few MB (an adapter).
class fnv1a64 {
 public:
  void bytes(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    for (size_t i = 0; i < n; ++i) {
      h_ ^= b[i];
      h_ *= 0x100000001b3ull;
    }
  }
  void u64(uint64_t v) {  // little-endian whatever the host
    uint8_t b[8];
    for (int i = 0; i < 8; ++i) b[i] = static_cast<uint8_t>(v >> (8 * i));
    bytes(b, 8);
  }
  void i64(int64_t v) { u64(static_cast<uint64_t>(v)); }
  void f64(double d) {
    uint64_t bits;
    std::memcpy(&bits, &d, 8);
    u64(bits);
  }
  void str(std::string_view s) {
    u64(s.size());
    bytes(s.data(), s.size());
  }
  uint64_t value() const { return h_; }

 private:
  uint64_t h_ = 0xcbf29ce484222325ull;
};

}  // namespace troupe
