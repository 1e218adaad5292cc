// CRC-32C: the standard check value, incremental use, and the instruction path equal to the table.
#include <boost/test/unit_test.hpp>

#include <random>
#include <string>
#include <vector>

#include "runtime/prefix/crc32c.hpp"

using namespace troupe::prefix;

BOOST_AUTO_TEST_SUITE(crc32c_suite)

BOOST_AUTO_TEST_CASE(check_value_of_123456789) {
  BOOST_TEST(crc32c("123456789", 9) == 0xe3069283u);
  BOOST_TEST(crc32c_portable("123456789", 9) == 0xe3069283u);
  BOOST_TEST(crc32c("", 0) == 0u);
  // RFC 3720 B.4: 32 bytes of zeros.
  std::vector<uint8_t> zeros(32, 0);
  BOOST_TEST(crc32c(zeros.data(), zeros.size()) == 0x8a9136aau);
}

BOOST_AUTO_TEST_CASE(incremental_equals_whole_and_fast_equals_portable) {
  std::mt19937 rng(7);
  std::vector<uint8_t> data(100003);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  const uint32_t whole = crc32c_portable(data.data(), data.size());
  BOOST_TEST(crc32c(data.data(), data.size()) == whole);
  // Unaligned starts and odd split points.
  for (size_t split : {size_t{1}, size_t{7}, size_t{8}, size_t{4097}, data.size() - 3}) {
    uint32_t c = crc32c(data.data(), split);
    c = crc32c(data.data() + split, data.size() - split, c);
    BOOST_TEST(c == whole, "split at " << split);
  }
  for (size_t off = 0; off < 9; ++off)
    BOOST_TEST(crc32c(data.data() + off, 1000) == crc32c_portable(data.data() + off, 1000), "offset " << off);
}

BOOST_AUTO_TEST_CASE(one_flipped_bit_changes_it) {
  std::vector<uint8_t> data(4096, 0x5a);
  const uint32_t before = crc32c(data.data(), data.size());
  data[2049] ^= 0x10;
  BOOST_TEST(crc32c(data.data(), data.size()) != before);
}

BOOST_AUTO_TEST_SUITE_END()
