// Gathering and scattering one block: the payload holds exactly that block's K and V of every
// layer, in layout order, and scattering it into another block reproduces them bit for bit.
#include <boost/test/unit_test.hpp>

#include <cstring>

#include "runtime/core/error.hpp"
#include "runtime/prefix/kv_block_io.hpp"

using namespace troupe;
using namespace troupe::prefix;

namespace {
model_config tiny_config() {
  model_config c;
  c.num_hidden_layers = 3;
  c.num_key_value_heads = 2;
  c.head_dim = 4;
  return c;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(kv_block_io_suite)

BOOST_AUTO_TEST_CASE(gather_then_scatter_copies_one_block_exactly) {
  kv_cache kv(tiny_config(), 5, 2);
  auto l = layout_of(kv);
  BOOST_TEST(l.num_layers == 3);
  BOOST_TEST(l.block_size == 2);
  BOOST_TEST(l.n_kv_heads == 2);
  BOOST_TEST(l.head_dim == 4);
  BOOST_TEST(l.payload_bytes() == 3u * 2 * (2 * 2 * 4) * 4);
  const size_t per_block = 2 * 2 * 4;  // floats of K (or V) per block per layer
  // Distinct values everywhere: value = layer * 1000 + (K: 0, V: 500) + flat index.
  for (int64_t i = 0; i < kv.num_layers(); ++i)
    for (size_t f = 0; f < per_block * 5; ++f) {
      kv.layer(i).k[f] = static_cast<float>(i * 1000 + f);
      kv.layer(i).v[f] = static_cast<float>(i * 1000 + 500 + f);
    }
  std::string payload = "prefix";  // gather appends
  gather_block(kv, 3, payload);
  BOOST_TEST(payload.size() == 6 + l.payload_bytes());
  std::vector<float> got((payload.size() - 6) / 4);
  std::memcpy(got.data(), payload.data() + 6, payload.size() - 6);
  for (int i = 0; i < 3; ++i)
    for (size_t f = 0; f < per_block; ++f) {
      BOOST_TEST(got[i * 2 * per_block + f] == static_cast<float>(i * 1000 + 3 * per_block + f));
      BOOST_TEST(got[i * 2 * per_block + per_block + f] == static_cast<float>(i * 1000 + 500 + 3 * per_block + f));
    }
  scatter_block(kv, 1, std::string_view(payload).substr(6));
  for (int64_t i = 0; i < kv.num_layers(); ++i) {
    BOOST_TEST(std::memcmp(kv.layer(i).k + per_block, kv.layer(i).k + 3 * per_block, per_block * 4) == 0);
    BOOST_TEST(std::memcmp(kv.layer(i).v + per_block, kv.layer(i).v + 3 * per_block, per_block * 4) == 0);
    BOOST_TEST(kv.layer(i).k[0] == static_cast<float>(i * 1000));              // block 0 untouched
    BOOST_TEST(kv.layer(i).k[2 * per_block] == static_cast<float>(i * 1000 + 2 * per_block));  // block 2 too
  }
}

BOOST_AUTO_TEST_CASE(bad_block_or_payload_size_is_refused_before_writing) {
  kv_cache kv(tiny_config(), 2, 2);
  std::string p;
  BOOST_CHECK_EXCEPTION(gather_block(kv, 2, p), troupe::error, [](const troupe::error& e) {
    return std::string(e.what()) == "gather_block: block 2 outside the pool of 2";
  });
  std::string small(10, 'x');
  BOOST_CHECK_EXCEPTION(scatter_block(kv, 0, small), troupe::error, [](const troupe::error& e) {
    return std::string(e.what()) == "scatter_block: payload has 10 bytes; a block of this pool has 384";
  });
  BOOST_TEST(kv.layer(0).k[0] == 0.0f);
}

BOOST_AUTO_TEST_SUITE_END()
