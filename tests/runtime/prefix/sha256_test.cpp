// SHA-256 against the FIPS 180-4 example digests, fed whole and in uneven pieces.
#include <boost/test/unit_test.hpp>

#include <string>

#include "runtime/prefix/sha256.hpp"

using troupe::prefix::sha256;

namespace {
std::string hex(const sha256::digest& d) {
  static const char* k = "0123456789abcdef";
  std::string s;
  for (auto b : d) {
    s += k[b >> 4];
    s += k[b & 15];
  }
  return s;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(sha256_suite)

BOOST_AUTO_TEST_CASE(fips_180_examples) {
  BOOST_TEST(hex(sha256::of("", 0)) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  BOOST_TEST(hex(sha256::of("abc", 3)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  std::string two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  BOOST_TEST(hex(sha256::of(two_blocks.data(), two_blocks.size())) ==
             "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

BOOST_AUTO_TEST_CASE(a_million_a_in_odd_pieces_and_reuse_after_finish) {
  std::string a(1000, 'a');
  sha256 h;
  size_t fed = 0;
  for (size_t piece = 1; fed < 1000000; piece = piece % 997 + 13) {
    size_t n = std::min(piece, 1000000 - fed);
    n = std::min(n, a.size());
    h.update(a.data(), n);
    fed += n;
  }
  BOOST_TEST(hex(h.finish()) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  h.update("abc", 3);  // finish() reset the state
  BOOST_TEST(hex(h.finish()) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

BOOST_AUTO_TEST_SUITE_END()
