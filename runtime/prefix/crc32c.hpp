// CRC-32C (Castagnoli, reflected polynomial 0x82f63b78, as iSCSI, ext4 and RocksDB use): the
// checksum of a serialized KV block. SSE4.2's crc32 instruction when the build has it (the x86-64-v2
// baseline does), a table otherwise; both give the same value.
#pragma once

#include <cstddef>
#include <cstdint>

namespace troupe::prefix {

// Continues `crc` (0 to start) over n bytes: crc32c(a + b) == crc32c(b, n_b, crc32c(a, n_a)).
uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0) noexcept;
// The table version, always compiled: the oracle the tests compare the instruction path with.
uint32_t crc32c_portable(const void* data, size_t n, uint32_t crc = 0) noexcept;

}  // namespace troupe::prefix
