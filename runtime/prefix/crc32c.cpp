#include "runtime/prefix/crc32c.hpp"

#include <array>
#include <cstring>

#if defined(__SSE4_2__)
#include <nmmintrin.h>
#endif

namespace troupe::prefix {

namespace {

constexpr std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr auto kTable = make_table();

}  // namespace

uint32_t crc32c_portable(const void* data, size_t n, uint32_t crc) noexcept {
  const auto* p = static_cast<const uint8_t*>(data);
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) crc = kTable[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

uint32_t crc32c(const void* data, size_t n, uint32_t crc) noexcept {
#if defined(__SSE4_2__) && defined(__x86_64__)
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t c = ~crc & 0xffffffffu;
  for (; n > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0; --n) c = _mm_crc32_u8(static_cast<uint32_t>(c), *p++);
  // One dependent crc32 per 8 bytes (3-cycle latency): ~8 GB/s, far above what Redis delivers.
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c = _mm_crc32_u64(c, v);
  }
  for (; n > 0; --n) c = _mm_crc32_u8(static_cast<uint32_t>(c), *p++);
  return ~static_cast<uint32_t>(c);
#else
  return crc32c_portable(data, n, crc);
#endif
}

}  // namespace troupe::prefix
