// Gathering and scattering one block: the payload holds exactly that block's K and V of every
// layer, in layout order, and scattering it into another block reproduces them bit for bit.
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <memory>
#include <vector>

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
  BOOST_TEST((layout_for(tiny_config(), 2) == l));
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

BOOST_AUTO_TEST_CASE(quantized_pools_carry_codes_and_scales) {
  for (dtype t : {dtype::i8, dtype::f8_e4m3}) {
    kv_cache kv(tiny_config(), 4, 2, t);
    auto l = layout_of(kv);
    BOOST_TEST(l.kv_dtype == (t == dtype::i8 ? "int8" : "fp8_e4m3"));
    BOOST_TEST(l.elem_bytes == 1);
    BOOST_TEST(l.scale_bytes == 4);
    BOOST_TEST((layout_for(tiny_config(), 2, t) == l));
    const size_t codes = 2 * 2 * 4, scales = 2 * 2;  // per block per layer: [2 slots, 2 heads, 4] and [2, 2]
    BOOST_TEST(l.payload_bytes() == 3u * 2 * (codes + scales * 4));
    for (int64_t i = 0; i < kv.num_layers(); ++i)
      for (size_t f = 0; f < codes * 4; ++f) {
        kv.layer(i).k_codes[f] = static_cast<uint8_t>(i * 50 + f);
        kv.layer(i).v_codes[f] = static_cast<uint8_t>(i * 50 + f + 100);
        if (f < scales * 4) {
          kv.layer(i).k_scales[f] = static_cast<float>(i) + 0.25f * static_cast<float>(f);
          kv.layer(i).v_scales[f] = -static_cast<float>(i) - 0.5f * static_cast<float>(f);
        }
      }
    std::string payload;
    gather_block(kv, 2, payload);
    BOOST_REQUIRE(payload.size() == l.payload_bytes());
    // Layer 0's K: codes of block 2, then its scales.
    BOOST_TEST(static_cast<uint8_t>(payload[0]) == 2 * codes);
    float s0;
    std::memcpy(&s0, payload.data() + codes, 4);
    BOOST_TEST(s0 == 0.25f * static_cast<float>(2 * scales));
    scatter_block(kv, 0, payload);
    for (int64_t i = 0; i < kv.num_layers(); ++i) {
      BOOST_TEST(std::memcmp(kv.layer(i).k_codes, kv.layer(i).k_codes + 2 * codes, codes) == 0);
      BOOST_TEST(std::memcmp(kv.layer(i).v_codes, kv.layer(i).v_codes + 2 * codes, codes) == 0);
      BOOST_TEST(std::memcmp(kv.layer(i).k_scales, kv.layer(i).k_scales + 2 * scales, scales * 4) == 0);
      BOOST_TEST(std::memcmp(kv.layer(i).v_scales, kv.layer(i).v_scales + 2 * scales, scales * 4) == 0);
      BOOST_TEST(kv.layer(i).k_codes[codes] == static_cast<uint8_t>(i * 50 + codes));  // block 1 untouched
    }
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

// A tensor-parallel group's pools (rank r: KV heads [r * H / n, (r + 1) * H / n), or with n > H the
// one head r / (n / H), replicated) give and take the payload a single pool of the whole model
// would: each rank ends up with exactly its heads of every slot, codes and scales, and gathering
// from the group returns the payload bit for bit.
BOOST_AUTO_TEST_CASE(a_tensor_parallel_groups_pools_share_the_whole_models_payload) {
  for (dtype t : {dtype::f32, dtype::i8}) {
    for (int32_t n : {2, 4, 8}) {
      const int32_t replicas = n > 4 ? n / 4 : 1;
      model_config whole_cfg = tiny_config();
      whole_cfg.num_key_value_heads = 4;
      kv_cache whole(whole_cfg, 3, 2, t);
      const bool q = t != dtype::f32;
      const size_t elems = 3 * 2 * 4 * 4, scales = 3 * 2 * 4;  // [3 blocks, 2 slots, 4 heads, (4 dims)]
      for (int64_t i = 0; i < whole.num_layers(); ++i)
        for (size_t f = 0; f < elems; ++f) {
          if (q) {
            whole.layer(i).k_codes[f] = static_cast<uint8_t>(i * 70 + f);
            whole.layer(i).v_codes[f] = static_cast<uint8_t>(i * 70 + f + 3);
            if (f < scales) {
              whole.layer(i).k_scales[f] = static_cast<float>(i * 100 + f) + 0.5f;
              whole.layer(i).v_scales[f] = -static_cast<float>(i * 100 + f);
            }
          } else {
            whole.layer(i).k[f] = static_cast<float>(i * 1000 + f);
            whole.layer(i).v[f] = -static_cast<float>(i * 1000 + f);
          }
        }
      std::string payload;
      gather_block(whole, 2, payload);

      model_config part_cfg = whole_cfg;
      part_cfg.num_key_value_heads = n > 4 ? 1 : 4 / n;
      std::vector<std::unique_ptr<kv_cache>> ranks;
      std::vector<kv_cache*> pools;
      for (int32_t r = 0; r < n; ++r) {
        ranks.push_back(std::make_unique<kv_cache>(part_cfg, 3, 2, t));
        pools.push_back(ranks.back().get());
      }
      const std::vector<const kv_cache*> cpools(pools.begin(), pools.end());
      BOOST_TEST((layout_of(cpools, replicas) == layout_of(whole)));
      scatter_block(pools, 1, payload, replicas);
      const int64_t per = part_cfg.num_key_value_heads;
      for (int64_t i = 0; i < whole.num_layers(); ++i)
        for (int32_t r = 0; r < n; ++r)
          for (int64_t slot = 0; slot < 2; ++slot)
            for (int64_t h = 0; h < per; ++h) {
              const int64_t head = replicas > 1 ? r / replicas : r * per + h;
              const int64_t src = (2 * 2 + slot) * 4 + head, dst = (1 * 2 + slot) * per + h;  // [block, slot, head]
              const auto& w = whole.layer(i);
              const auto& p = ranks[static_cast<size_t>(r)]->layer(i);
              if (q) {
                BOOST_TEST(std::memcmp(p.k_codes + dst * 4, w.k_codes + src * 4, 4) == 0);
                BOOST_TEST(std::memcmp(p.v_codes + dst * 4, w.v_codes + src * 4, 4) == 0);
                BOOST_TEST(p.k_scales[dst] == w.k_scales[src]);
                BOOST_TEST(p.v_scales[dst] == w.v_scales[src]);
              } else {
                BOOST_TEST(std::memcmp(p.k + dst * 4, w.k + src * 4, 16) == 0, "layer " << i << " rank " << r << " slot " << slot << " head " << h);
                BOOST_TEST(std::memcmp(p.v + dst * 4, w.v + src * 4, 16) == 0);
              }
            }
      std::string back;
      gather_block(cpools, 1, back, replicas);
      BOOST_TEST((back == payload), "n " << n << ": the group's payload differs from the whole pool's");
      BOOST_CHECK_THROW(scatter_block(pools, 3, payload, replicas), troupe::error);  // outside the pools
      BOOST_CHECK_THROW(scatter_block(pools, 0, std::string_view(payload).substr(1), replicas), troupe::error);
      BOOST_CHECK_THROW(gather_block(cpools, 1, back, 3), troupe::error);  // 3 does not group the ranks
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
