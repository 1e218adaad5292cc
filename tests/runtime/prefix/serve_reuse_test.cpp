// Serving with prefix caching: scheduler + batch executor on golden checkpoints, greedy outputs
// with the cache on equal the cache off (whole and chunked prompts, shared prefixes, a small pool
// that evicts and preempts); and a second "replica" that starts empty and takes the first one's
// blocks from a shared store, through the real codec and checks, with outputs equal a cold run.
#include <boost/test/unit_test.hpp>
#include <boost/test/data/test_case.hpp>

#include <map>
#include <random>

#include "runtime/model/checkpoint.hpp"
#include "runtime/prefix/kv_block_io.hpp"
#include "runtime/prefix/memory_kv_store.hpp"
#include "runtime/prefix/remote_cache.hpp"
#include "runtime/serve/batch_executor.hpp"
#include "tests/runtime/serve/replica.hpp"

using namespace troupe;
using namespace troupe::serve;
using troupe::testing::replica;
using troupe::testing::request;

namespace {

const char* kSets[] = {"tiny-dense", "tiny-moe", "e2e-full-vocab"};

std::shared_ptr<const checkpoint> load(const std::string& name) {
  static std::map<std::string, std::shared_ptr<const checkpoint>> cache;
  auto& c = cache[name];
  if (!c) c = load_checkpoint(std::string(TROUPE_TEST_DATA_DIR) + "/golden/" + name);
  return c;
}

// Conversations over one shared system prompt: each turn resends the history plus new tokens.
std::vector<request> chat_requests(int64_t vocab, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> system;
  for (int i = 0; i < 37; ++i) system.push_back(static_cast<int32_t>(rng() % vocab));
  std::vector<request> out;
  for (int conv = 0; conv < 3; ++conv) {
    std::vector<int32_t> history = system;
    for (int turn = 0; turn < 3; ++turn) {
      for (int i = 0, n = 5 + static_cast<int>(rng() % 20); i < n; ++i) history.push_back(static_cast<int32_t>(rng() % vocab));
      out.push_back({history, 3 + static_cast<int32_t>(rng() % 4)});
    }
  }
  return out;
}

sched::sched_config config(bool prefix, int32_t budget, bool remote = false) {
  sched::sched_config c;
  c.max_num_seqs = 4;
  c.max_num_batched_tokens = budget;
  c.max_model_len = 128;
  c.enable_prefix_caching = prefix;
  c.prefix_identity.model_fingerprint = "golden";
  c.prefix_options.remote = remote;
  return c;
}

}  // namespace

BOOST_DATA_TEST_CASE(greedy_outputs_with_the_cache_equal_without, boost::unit_test::data::make(kSets), set) {
  auto ck = load(set);
  auto reqs = chat_requests(ck->config.vocab_size, 11);
  for (int32_t budget : {512, 7}) {  // whole prompts, and chunks of 7 tokens
    for (int32_t blocks : {64, 9}) {  // roomy, and small enough to evict (and preempt)
      replica off(ck, config(false, budget), blocks, 16), on(ck, config(true, budget), blocks, 16);
      // Sequentially: each turn can reuse what the earlier ones left cached.
      for (size_t i = 0; i < reqs.size(); ++i) {
        off.add(static_cast<int64_t>(i), reqs[i]);
        off.run();
        on.add(static_cast<int64_t>(i), reqs[i]);
        on.run();
      }
      for (size_t i = 0; i < reqs.size(); ++i)
        BOOST_TEST(on.out[static_cast<int64_t>(i)] == off.out[static_cast<int64_t>(i)], boost::test_tools::per_element());
      auto st = on.s.prefix_cache()->stats();
      BOOST_TEST(st.hit_tokens > 0);
      if (blocks == 9) BOOST_TEST(st.evicted_blocks > 0);
      BOOST_TEST_MESSAGE(set << " budget " << budget << " blocks " << blocks << ": " << st.hit_tokens << " of "
                             << st.query_tokens << " prompt tokens cached, " << st.evicted_blocks << " evictions");
      // All at once too: sharing between running sequences.
      replica both(ck, config(true, budget), blocks, 16);
      for (size_t i = 0; i < reqs.size(); ++i) both.add(static_cast<int64_t>(i), reqs[i]);
      both.run();
      for (size_t i = 0; i < reqs.size(); ++i)
        BOOST_TEST(both.out[static_cast<int64_t>(i)] == off.out[static_cast<int64_t>(i)], boost::test_tools::per_element());
    }
  }
}

BOOST_DATA_TEST_CASE(a_second_replica_reuses_the_first_ones_blocks_through_the_store,
                     boost::unit_test::data::make(kSets), set) {
  auto ck = load(set);
  auto reqs = chat_requests(ck->config.vocab_size, 5);
  prefix::memory_kv_store store;
  prefix::cost_model cost;  // priors: fetching a tiny model's blocks is always worth it here
  prefix::cache_identity id;
  id.model_fingerprint = "golden";
  id.block_size = 16;

  replica cold(ck, config(false, 512), 64, 16);
  for (size_t i = 0; i < reqs.size(); ++i) cold.add(static_cast<int64_t>(i), reqs[i]);
  cold.run();

  replica a(ck, config(true, 512, true), 64, 16), b(ck, config(true, 512, true), 64, 16);
  for (auto* r : {&a, &b}) {
    prefix::block_codec codec(id.key_component(), r->ex.kv_layout());
    r->remote = std::make_unique<prefix::remote_cache>(store, codec, id, prefix::remote_options{}, cost);
  }
  // A serves the first turn of every conversation; B then serves the second turns, whose
  // history A computed.
  for (int64_t i : {0, 3, 6}) a.add(i, reqs[static_cast<size_t>(i)]);
  a.run();
  BOOST_TEST(store.size() > 0u);
  for (int64_t i : {1, 4, 7}) b.add(i, reqs[static_cast<size_t>(i)]);
  b.run();
  for (int64_t i : {1, 4, 7}) {
    BOOST_TEST(b.out[i] == cold.out[i], boost::test_tools::per_element());
    BOOST_TEST(b.cached[i] >= 32, "request " << i << " reused " << b.cached[i] << " tokens");
  }
  BOOST_TEST(b.s.prefix_cache()->stats().remote_hit_tokens > 0);
  BOOST_TEST(b.remote->stats().blocks_fetched > 0);
  BOOST_TEST(b.remote->stats().rejected_total() == 0);

  // Corrupt every entry: a third replica must refuse them all and still answer exactly.
  replica c(ck, config(true, 512, true), 64, 16);
  {
    prefix::block_codec codec(id.key_component(), c.ex.kv_layout());
    c.remote = std::make_unique<prefix::remote_cache>(store, codec, id, prefix::remote_options{}, cost);
  }
  for (int64_t i : {0, 3, 6}) {
    // Every block key of this prompt: flip one payload byte in each stored entry.
    auto root = prefix::root_hash(id);
    std::vector<prefix::block_hash> hashes;
    prefix::extend_block_hashes(hashes, root, reqs[static_cast<size_t>(i)].prompt, 16);
    for (const auto& h : hashes) {
      auto key = c.remote->key(h);
      if (auto v = store.raw_get(key)) {
        (*v)[v->size() / 2] ^= 0x01;
        store.raw_set(key, *v);
      }
    }
  }
  for (int64_t i : {1, 4, 7}) c.add(i, reqs[static_cast<size_t>(i)]);
  c.run();
  for (int64_t i : {1, 4, 7}) BOOST_TEST(c.out[i] == cold.out[i], boost::test_tools::per_element());
  BOOST_TEST(c.remote->stats().rejected[static_cast<size_t>(prefix::check_status::checksum_mismatch)] > 0);
  BOOST_TEST(c.s.prefix_cache()->stats().remote_hit_tokens == 0);
}
