// Fast non-cryptographic hashing for the tokenizer's in-memory tables (never persisted).
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace troupe::tok {

inline uint64_t mix64(uint64_t x) noexcept {
  x ^= x >> 32;
  x *= 0xD6E8FEB86659FD93ULL;
  x ^= x >> 32;
  x *= 0xD6E8FEB86659FD93ULL;
  x ^= x >> 32;
  return x;
}

// Eight bytes at a time; short words (the common case) take one or two multiplies.
inline uint64_t hash_bytes(std::string_view s) noexcept {
  const char* p = s.data();
  size_t n = s.size();
  uint64_t h = 0x9E3779B97F4A7C15ULL ^ (n * 0xFF51AFD7ED558CCDULL);
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = (h ^ w) * 0xBF58476D1CE4E5B9ULL;
    h ^= h >> 29;
    p += 8;
    n -= 8;
  }
  if (n) {
    uint64_t w = 0;
    std::memcpy(&w, p, n);
    h = (h ^ w) * 0x94D049BB133111EBULL;
  }
  return mix64(h);
}

}  // namespace troupe::tok
