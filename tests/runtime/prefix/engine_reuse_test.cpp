// The engine's batch and chunk invariance makes a reused block exact: K/V copied out of one
// sequence's blocks into another's table, then only the rest prefilled, give the same logits bit
// for bit as a cold prefill, for every golden checkpoint.
#include <boost/test/unit_test.hpp>
#include <boost/test/data/test_case.hpp>

#include <cstring>
#include <numeric>
#include <utility>

#include "runtime/engine/model_runner.hpp"
#include "runtime/engine/tensor_parallel_runner.hpp"
#include "runtime/model/checkpoint.hpp"
#include "runtime/prefix/kv_block_io.hpp"
#include "tests/runtime/engine/golden.hpp"

using namespace troupe;

namespace {

const char* kSets[] = {"tiny-dense", "tiny-untied-sharded", "tiny-moe", "e2e-full-vocab"};

std::shared_ptr<checkpoint> load(const std::string& name) {
  static std::map<std::string, std::shared_ptr<checkpoint>> cache;
  auto& c = cache[name];
  if (!c) c = load_checkpoint(testing::golden_dir(name));
  return c;
}

// Logits of every position of `tokens` [from, n) after a prefill in chunks of `chunk`.
template <class Runner>
std::vector<float> prefill(Runner& runner, std::span<const int32_t> table, std::span<const int32_t> tokens,
                           int32_t from, int32_t chunk) {
  std::vector<float> rows;
  step_result res;
  for (int32_t start = from; start < static_cast<int32_t>(tokens.size()); start += chunk) {
    int32_t n = std::min<int32_t>(chunk, static_cast<int32_t>(tokens.size()) - start);
    step_sequence sq{0, tokens.subspan(static_cast<size_t>(start), static_cast<size_t>(n)), start, table, logits_mode::all};
    runner.step(std::span<const step_sequence>(&sq, 1), res);
    rows.insert(rows.end(), res.logits.begin(), res.logits.end());
  }
  return rows;
}

}  // namespace

static void check_reuse(const std::string& set, dtype kv_type) {
  auto ck = load(set);
  const int64_t vocab = ck->config.vocab_size;
  const int32_t bs = 4;
  for (const auto& c : testing::load_golden(set)) {
    if (c.prompt.size() < 6) continue;
    const int32_t n = static_cast<int32_t>(std::min<size_t>(c.prompt.size(), 64));
    std::span<const int32_t> prompt(c.prompt.data(), static_cast<size_t>(n));
    const int32_t blocks = (n + bs - 1) / bs;
    const int32_t reused = (n - 1) / bs;  // full blocks a cache hit would give

    // Cold: one sequence, blocks 0..blocks-1, prefilled in chunks of 5 (chunking must not matter).
    kv_cache kv_a(ck->config, blocks, bs, kv_type);
    model_runner cold(*ck, kv_a);
    std::vector<int32_t> table_a(static_cast<size_t>(blocks));
    std::iota(table_a.begin(), table_a.end(), 0);
    auto cold_rows = prefill(cold, table_a, prompt, 0, 5);

    // Warm: another pool; the reused blocks land in other block ids (reversed, offset), copied
    // through the payload format the shared store carries.
    kv_cache kv_b(ck->config, blocks + 3, bs, kv_type);
    model_runner warm(*ck, kv_b);
    std::vector<int32_t> table_b(static_cast<size_t>(blocks));
    for (int32_t b = 0; b < blocks; ++b) table_b[static_cast<size_t>(b)] = blocks + 2 - b;
    for (int32_t b = 0; b < reused; ++b) {
      std::string payload;
      prefix::gather_block(kv_a, table_a[static_cast<size_t>(b)], payload);
      prefix::scatter_block(kv_b, table_b[static_cast<size_t>(b)], payload);
    }
    auto warm_rows = prefill(warm, table_b, prompt, reused * bs, n);

    const size_t skip = static_cast<size_t>(reused * bs) * static_cast<size_t>(vocab);
    BOOST_REQUIRE_EQUAL(warm_rows.size(), cold_rows.size() - skip);
    BOOST_TEST(std::memcmp(warm_rows.data(), cold_rows.data() + skip, warm_rows.size() * sizeof(float)) == 0,
               set << " " << c.id << " KV " << to_string(kv_type) << ": logits after " << reused
                   << " reused blocks differ from the cold run");
    // And the K/V the warm run computed for the rest equals the cold run's, so decoding goes on
    // identically too.
    for (int32_t b = reused; b < blocks; ++b) {
      std::string pa, pb;
      prefix::gather_block(kv_a, table_a[static_cast<size_t>(b)], pa);
      prefix::gather_block(kv_b, table_b[static_cast<size_t>(b)], pb);
      BOOST_TEST((pa == pb), set << " " << c.id << ": block " << b << " K/V differ");
    }
  }
}

BOOST_DATA_TEST_CASE(copied_blocks_give_bit_identical_logits, boost::unit_test::data::make(kSets), set) {
  check_reuse(set, dtype::f32);
}

// INT8 / FP8 pools: codes and per-token scales travel together and reproduce the same logits.
BOOST_AUTO_TEST_CASE(copied_quantized_blocks_give_bit_identical_logits) {
  check_reuse("tiny-dense", dtype::i8);
  check_reuse("tiny-moe", dtype::f8_e4m3);
}

// A group of 4 ranks over 2 KV heads holds each head twice (shard.hpp): blocks gathered from one
// group (the first replica of each head) and scattered into another (every replica) give the warm
// group the cold group's logits bit for bit, and the payload has the whole model's layout.
BOOST_AUTO_TEST_CASE(a_replicated_groups_blocks_are_reused_exactly) {
  auto ck = load("tiny-dense");  // 4 query heads, 2 KV heads
  const int64_t vocab = ck->config.vocab_size;
  const int32_t bs = 4;
  for (const auto& c : testing::load_golden("tiny-dense")) {
    const int32_t n = static_cast<int32_t>(std::min<size_t>(c.prompt.size(), 64));
    std::span<const int32_t> prompt(c.prompt.data(), static_cast<size_t>(n));
    const int32_t blocks = (n + bs - 1) / bs, reused = (n - 1) / bs;
    tensor_parallel_runner cold(*ck, blocks, bs, dtype::f32, {}, 4);
    BOOST_TEST_REQUIRE(cold.kv_replicas() == 2);
    std::vector<int32_t> table_a(static_cast<size_t>(blocks));
    std::iota(table_a.begin(), table_a.end(), 0);
    auto cold_rows = prefill(cold, table_a, prompt, 0, 5);

    tensor_parallel_runner warm(*ck, blocks + 3, bs, dtype::f32, {}, 4);
    std::vector<int32_t> table_b(static_cast<size_t>(blocks));
    for (int32_t b = 0; b < blocks; ++b) table_b[static_cast<size_t>(b)] = blocks + 2 - b;
    BOOST_TEST((prefix::layout_of(std::as_const(cold).pools(), 2) == prefix::layout_for(ck->config, bs)));
    for (int32_t b = 0; b < reused; ++b) {
      std::string payload;
      prefix::gather_block(std::as_const(cold).pools(), table_a[static_cast<size_t>(b)], payload, 2);
      prefix::scatter_block(warm.pools(), table_b[static_cast<size_t>(b)], payload, 2);
    }
    auto warm_rows = prefill(warm, table_b, prompt, reused * bs, n);
    const size_t skip = static_cast<size_t>(reused * bs) * static_cast<size_t>(vocab);
    BOOST_REQUIRE_EQUAL(warm_rows.size(), cold_rows.size() - skip);
    BOOST_TEST(std::memcmp(warm_rows.data(), cold_rows.data() + skip, warm_rows.size() * sizeof(float)) == 0,
               c.id << ": logits after " << reused << " reused blocks differ from the cold group's");
  }
}
