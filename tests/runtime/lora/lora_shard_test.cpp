// shard_lora_adapter against the adapter it splits: over each rank of a group, the output-split
// projections' B rows and the input-split projections' A columns put back together are the
// whole adapter's, and everything else is kept whole on every rank.
#include <boost/test/unit_test.hpp>

#include "runtime/core/error.hpp"
#include "runtime/lora/lora_shard.hpp"
#include "runtime/model/config.hpp"
#include "tests/runtime/model/test_util.hpp"

using namespace troupe;
using namespace troupe::test;

BOOST_AUTO_TEST_SUITE(lora_shard)

BOOST_AUTO_TEST_CASE(the_ranks_shares_put_together_are_the_adapter) {
  for (const char* set : {"tiny-dense-lora", "tiny-dense-lora-rs", "tiny-moe-lora"}) {
    const std::string config_path = golden(set) + "/config.json";
    const model_config cfg = parse_model_config(read_file(config_path), config_path);
    const lora_adapter full = load_lora_adapter(golden(set) + "/adapter", cfg);
    const int32_t size = 2;
    std::vector<lora_adapter> shares;
    for (int32_t r = 0; r < size; ++r) shares.push_back(shard_lora_adapter(full, cfg, r, size));
    int64_t checked = 0;
    for (size_t l = 0; l < full.layers.size(); ++l)
      for (int t = 0; t < kLoraTargets; ++t) {
        const lora_pair& p = full.layers[l][static_cast<size_t>(t)];
        const auto target = static_cast<lora_target>(t);
        const bool input_split = target == lora_target::o_proj || target == lora_target::down_proj;
        std::vector<float> a, b;  // the shares' split matrix put back together
        for (int32_t r = 0; r < size; ++r) {
          const lora_pair& s = shares[static_cast<size_t>(r)].layers[l][static_cast<size_t>(t)];
          BOOST_TEST_REQUIRE(s.rank == p.rank, set << " layer " << l << " " << to_string(target));
          if (p.rank == 0) continue;
          BOOST_TEST(s.scaling == p.scaling);
          if (input_split) {
            BOOST_TEST(s.out == p.out);
            BOOST_TEST(s.in * size == p.in);
            BOOST_TEST((s.b == p.b), set << " layer " << l << " " << to_string(target) << ": B must stay whole");
          } else {
            BOOST_TEST(s.in == p.in);
            BOOST_TEST(s.out * size == p.out);
            BOOST_TEST((s.a == p.a), set << " layer " << l << " " << to_string(target) << ": A must stay whole");
            b.insert(b.end(), s.b.begin(), s.b.end());
          }
        }
        if (p.rank == 0) continue;
        if (input_split) {  // row k of A: rank 0's columns, then rank 1's
          for (int64_t k = 0; k < p.rank; ++k)
            for (int32_t r = 0; r < size; ++r) {
              const lora_pair& s = shares[static_cast<size_t>(r)].layers[l][static_cast<size_t>(t)];
              a.insert(a.end(), s.a.begin() + k * s.in, s.a.begin() + (k + 1) * s.in);
            }
          BOOST_TEST((a == p.a), set << " layer " << l << " " << to_string(target));
        } else {
          BOOST_TEST((b == p.b), set << " layer " << l << " " << to_string(target));
        }
        ++checked;
      }
    BOOST_TEST(checked == full.pairs, set);
    for (const auto& s : shares) {
      BOOST_TEST(s.identity == full.identity);
      BOOST_TEST(s.name == full.name);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_rank_outside_the_group_or_another_model_is_refused) {
  const std::string config_path = golden("tiny-dense-lora") + "/config.json";
  const model_config cfg = parse_model_config(read_file(config_path), config_path);
  const lora_adapter full = load_lora_adapter(golden("tiny-dense-lora") + "/adapter", cfg);
  auto refused = [&](const model_config& c, int32_t rank, int32_t size, const std::string& needle) {
    try {
      shard_lora_adapter(full, c, rank, size);
      BOOST_ERROR("rank " << rank << " of " << size << " accepted");
    } catch (const troupe::error& e) {
      BOOST_TEST(static_cast<int>(e.code()) == static_cast<int>(errc::invalid_argument));
      BOOST_TEST(std::string(e.what()).find(needle) != std::string::npos, e.what());
    }
  };
  refused(cfg, 2, 2, "rank 2 outside a group of 2");
  refused(cfg, -1, 2, "rank -1 outside a group of 2");
  model_config other = cfg;
  other.num_hidden_layers += 1;
  refused(other, 0, 2, "was not loaded for this model's");
}

BOOST_AUTO_TEST_SUITE_END()
