// The shared-store logic over an in-memory store: found runs by both look-up strategies, the cost
// model's decision, windows, the refusal of every bad entry (and the chain ending there), deadlines
// and a store that is down; publishing writes only what is missing.
#include <boost/test/unit_test.hpp>

#include "runtime/core/error.hpp"
#include "runtime/prefix/memory_kv_store.hpp"
#include "runtime/prefix/remote_cache.hpp"
#include "tests/runtime/prefix/print.hpp"

using namespace troupe;
using namespace troupe::prefix;
using namespace std::chrono_literals;

namespace {

struct fixture {
  cache_identity id;
  kv_layout layout;
  std::vector<int32_t> tokens;
  std::vector<block_meta> metas;
  memory_kv_store store;
  cost_model cost;

  fixture() {
    id.model_fingerprint = "rc-test";
    id.block_size = 4;
    layout.num_layers = 1;
    layout.block_size = 4;
    layout.n_kv_heads = 1;
    layout.head_dim = 4;
    for (int i = 0; i < 40; ++i) tokens.push_back(7 * i + 1);
    std::vector<block_hash> h;
    extend_block_hashes(h, root_hash(id), tokens, 4);
    for (size_t b = 0; b < h.size(); ++b)
      metas.push_back({h[b], b == 0 ? root_hash(id) : h[b - 1],
                       std::vector<int32_t>(tokens.begin() + static_cast<long>(4 * b), tokens.begin() + static_cast<long>(4 * b + 4))});
  }
  block_codec codec() const { return block_codec(id.key_component(), layout); }
  remote_cache cache(remote_options o = {}) { return remote_cache(store, codec(), id, o, cost); }
  std::string payload(size_t b) const { return std::string(layout.payload_bytes(), static_cast<char>('A' + b)); }
  std::vector<saved_block> saved(size_t from, size_t to) const {
    std::vector<saved_block> v;
    for (size_t b = from; b < to; ++b) v.push_back({metas[b], payload(b)});
    return v;
  }
  remote_lookup lookup(size_t first = 0) const {
    return {1, first, std::vector<block_meta>(metas.begin() + static_cast<long>(first), metas.end())};
  }
  static store_clock::time_point in(std::chrono::milliseconds d) { return store_clock::now() + d; }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(remote_cache_suite, fixture)

BOOST_AUTO_TEST_CASE(publish_writes_only_missing_blocks_with_the_ttl) {
  remote_options o;
  o.ttl = 120s;
  auto rc = cache(o);
  BOOST_TEST(rc.publish(saved(0, 3), in(1000ms)) == 3u);
  BOOST_TEST(rc.publish(saved(0, 5), in(1000ms)) == 2u);
  auto st = rc.stats();
  BOOST_TEST(st.blocks_offered == 8);
  BOOST_TEST(st.blocks_present == 3);
  BOOST_TEST(st.blocks_written == 5);
  BOOST_TEST(store.size() == 5u);
  BOOST_TEST(rc.key(metas[0].hash) == "troupe:v1:rc-test:kv-f32:" + metas[0].hash.hex());
  BOOST_TEST(store.raw_ttl(rc.key(metas[4].hash))->count() == 120);
  std::string_view p;
  BOOST_TEST(codec().check(*store.raw_get(rc.key(metas[2].hash)), metas[2], &p) == check_status::ok);
  BOOST_TEST(p == payload(2));
}

BOOST_AUTO_TEST_CASE(fetch_returns_the_leading_run_with_either_strategy) {
  auto rc = cache();
  rc.publish(saved(0, 6), in(1000ms));
  for (auto strategy : {lookup_strategy::pipelined, lookup_strategy::binary_search}) {
    remote_options o;
    o.strategy = strategy;
    auto r = cache(o).fetch(lookup(), in(1000ms));
    BOOST_TEST((r.decision == fetch_decision::fetch));
    BOOST_TEST(r.num_found == 6u);
    BOOST_REQUIRE(r.blocks.payloads.size() == 6u);
    BOOST_TEST(r.blocks.first_block == 0u);
    BOOST_TEST(r.blocks.payloads[5].bytes == payload(5));
  }
  // From the middle of the chain (the local cache held the first blocks).
  auto r = rc.fetch(lookup(2), in(1000ms));
  BOOST_TEST(r.blocks.first_block == 2u);
  BOOST_REQUIRE(r.blocks.payloads.size() == 4u);
  BOOST_TEST(r.blocks.payloads[0].bytes == payload(2));
}

BOOST_AUTO_TEST_CASE(a_gap_ends_the_chain_for_both_strategies) {
  auto rc = cache();
  rc.publish(saved(0, 8), in(1000ms));
  store.raw_erase(rc.key(metas[3].hash));  // evicted in the middle
  remote_options pipelined;
  auto r = cache(pipelined).fetch(lookup(), in(1000ms));
  BOOST_TEST(r.num_found == 3u);
  BOOST_TEST(r.blocks.payloads.size() == 3u);
  remote_options binary;
  binary.strategy = lookup_strategy::binary_search;
  auto rb = cache(binary).fetch(lookup(), in(1000ms));
  BOOST_TEST(rb.num_found == 8u);               // it assumes a prefix and finds block 7 ...
  BOOST_TEST(rb.blocks.payloads.size() == 3u);  // ... but the read stops at the gap
}

BOOST_AUTO_TEST_CASE(each_bad_entry_is_refused_and_ends_the_chain) {
  auto rc = cache();
  rc.publish(saved(0, 6), in(1000ms));
  const auto key3 = rc.key(metas[3].hash);
  const auto good3 = *store.raw_get(key3);
  struct corruption {
    std::string name;
    std::string value;
    check_status expect;
  };
  block_codec foreign("other-model:kv-f32", layout);
  std::string flipped = good3;
  flipped[flipped.size() / 2] ^= 0x20;
  std::vector<corruption> cases = {
      {"flipped payload byte", flipped, check_status::checksum_mismatch},
      {"truncated", good3.substr(0, good3.size() - 10), check_status::bad_length},
      {"garbage", "not a block at all", check_status::bad_magic},
      {"another model's block", foreign.encode(metas[3], payload(3)), check_status::identity_mismatch},
      {"another block's entry", codec().encode(metas[4], payload(4)), check_status::hash_mismatch},
  };
  for (const auto& c : cases) {
    store.raw_set(key3, c.value);
    auto before = rc.stats().rejected[static_cast<size_t>(c.expect)];
    auto r = rc.fetch(lookup(), in(1000ms));
    BOOST_TEST(r.blocks.payloads.size() == 3u, c.name);
    BOOST_TEST((r.decision == fetch_decision::fetch), c.name);
    BOOST_TEST(rc.stats().rejected[static_cast<size_t>(c.expect)] == before + 1, c.name);
  }
  store.raw_set(rc.key(metas[0].hash), "junk");  // the first block bad: nothing usable
  auto r = rc.fetch(lookup(), in(1000ms));
  BOOST_TEST(r.blocks.payloads.empty());
  BOOST_TEST((r.decision == fetch_decision::recompute));
}

BOOST_AUTO_TEST_CASE(the_cost_model_can_decline) {
  auto rc = cache();
  rc.publish(saved(0, 4), in(1000ms));
  cost_options co;
  co.prior_prefill_tokens_per_s = 1e12;  // recomputing is free
  cost_model fast(co);
  remote_cache declines(store, codec(), id, {}, fast);
  auto r = declines.fetch(lookup(), in(1000ms));
  BOOST_TEST((r.decision == fetch_decision::recompute));
  BOOST_TEST(r.num_found == 4u);
  BOOST_TEST(r.blocks.payloads.empty());
  BOOST_TEST(declines.stats().decisions[static_cast<size_t>(fetch_decision::recompute)] == 1);
}

BOOST_AUTO_TEST_CASE(windows_and_deadlines) {
  auto rc = cache();
  rc.publish(saved(0, 10), in(1000ms));
  remote_options o;
  o.fetch_window_bytes = codec().encoded_bytes() * 3;  // 3 blocks per GET
  auto windowed = cache(o);
  const auto calls = store.num_calls();
  auto r = windowed.fetch(lookup(), in(1000ms));
  BOOST_TEST(r.blocks.payloads.size() == 10u);
  BOOST_TEST(store.num_calls() - calls == 1 + 4);  // EXISTS, then GETs of 3, 3, 3, 1
  // A store far slower than the deadline: nothing, and no later than the deadline (the slack
  // allows for a loaded machine's wake-ups; a fetch that ignored the deadline takes 500 ms).
  store.set_latency(500ms);
  auto t0 = store_clock::now();
  auto slow = rc.fetch(lookup(), in(20ms));
  BOOST_TEST((slow.decision == fetch_decision::unavailable));
  const double took_ms = std::chrono::duration<double, std::milli>(store_clock::now() - t0).count();
  BOOST_TEST(took_ms < 250.0);
  store.set_latency(0ms);
  store.set_down(true);
  BOOST_TEST((rc.fetch(lookup(), in(1000ms)).decision == fetch_decision::unavailable));
  BOOST_TEST(rc.publish(saved(0, 2), in(1000ms)) == 0u);
  BOOST_TEST(rc.stats().store_failures == 3);
  store.set_down(false);
  BOOST_TEST((rc.fetch(lookup(), in(1000ms)).decision == fetch_decision::fetch));
}

BOOST_AUTO_TEST_CASE(nothing_found_and_bad_configuration) {
  auto r = cache().fetch(lookup(), in(1000ms));
  BOOST_TEST((r.decision == fetch_decision::not_found));
  remote_options bad;
  bad.ns = "a b";
  BOOST_CHECK_THROW(cache(bad), troupe::error);
  BOOST_CHECK_EXCEPTION(remote_cache(store, block_codec("x:kv-f32", layout), id, {}, cost), troupe::error,
                        [](const troupe::error& e) {
                          return std::string(e.what()).find("differs from the cache identity") != std::string::npos;
                        });
}

BOOST_AUTO_TEST_SUITE_END()
