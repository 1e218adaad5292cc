// Prefix caching through the scheduler, on a simulated paged pool that records which token's K/V
// each slot holds: every step checks that the context a sequence attends to is exactly its own
// tokens (a wrongly shared, evicted-while-used or overwritten block fails at once), and outputs
// come from that pool, so they equal a cache-off reference only if reuse was right.
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <map>
#include <random>
#include <sstream>

#include "runtime/sched/scheduler.hpp"
#include "tests/runtime/prefix/print.hpp"
#include "tests/runtime/sched/paged_sim.hpp"

using namespace troupe;
using namespace troupe::sched;
using ids = std::vector<block_id>;
using namespace troupe::sched::test;

namespace {

sched_config prefix_config(bool remote = false) {
  sched_config c;
  c.max_num_seqs = 8;
  c.max_num_batched_tokens = 64;
  c.max_model_len = 24;
  c.enable_prefix_caching = true;
  c.prefix_identity.model_fingerprint = "sim-model";
  c.prefix_options.remote = remote;
  return c;
}

// The payload a shared store would return for a block: here, its token ids.
prefix::stored_value token_payload(std::span<const int32_t> tokens) {
  auto bytes = std::make_shared<std::string>(tokens.size() * 4, '\0');
  std::memcpy(bytes->data(), tokens.data(), bytes->size());
  return {bytes, *bytes};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(scheduler_prefix)

BOOST_AUTO_TEST_CASE(a_repeated_prompt_reuses_its_full_blocks) {
  paged_sim sim(prefix_config(), 16, 4);
  auto p = tokens_from(100, 10);
  sim.add(1, p, 3);
  BOOST_TEST(sim.step() == "1:0+10* ");
  BOOST_TEST(sim.table_of(1) == (ids{0, 1, 2}), boost::test_tools::per_element());
  sim.run();
  BOOST_TEST(sim.cached[1] == 0);
  // Positions 0..11 were computed: three full blocks, now cached and free (LRU end of the list).
  BOOST_TEST(sim.pc().index().num_cached_blocks() == 3);
  BOOST_TEST(sim.s.allocator().num_free_blocks() == 16);

  sim.add(2, p, 3);
  // (10 - 1) / 4 = 2 blocks reusable: the last token is always computed.
  BOOST_TEST(sim.step() == "2:8+2* ");
  BOOST_TEST(sim.cached[2] == 8);
  BOOST_TEST(sim.table_of(2) == (ids{0, 1, 3}), boost::test_tools::per_element());
  sim.run();
  sim.check_outputs();
  auto st = sim.pc().stats();
  BOOST_TEST(st.num_queries == 2);
  BOOST_TEST(st.num_hits == 1);
  BOOST_TEST(st.query_tokens == 20);
  BOOST_TEST(st.hit_tokens == 8);
  BOOST_TEST(st.remote_hit_tokens == 0);
}

// LoRA adapters: a sequence's blocks are keyed from its adapter's root, so the same prompt under
// another adapter (or none) reuses nothing, under the same one its blocks; the step carries each
// sequence's adapter slot.
BOOST_AUTO_TEST_CASE(blocks_are_shared_only_under_the_same_adapter) {
  paged_sim sim(prefix_config(), 32, 4);
  auto p = tokens_from(100, 10);
  sim.add(1, p, 2, false, -1, /*adapter=*/0);
  sim.run();
  sim.add(2, p, 2, false, -1, 1);
  sim.run();
  sim.add(3, p, 2);
  sim.run();
  BOOST_TEST(sim.cached[1] == 0);
  BOOST_TEST(sim.cached[2] == 0);  // adapter 0's blocks are not adapter 1's K/V
  BOOST_TEST(sim.cached[3] == 0);  // nor the base model's
  sim.add(4, p, 2, false, -1, 0);
  sim.add(5, p, 2, false, -1, 1);
  sim.add(6, p, 2);
  sim.run();
  BOOST_TEST(sim.cached[4] == 8);
  BOOST_TEST(sim.cached[5] == 8);
  BOOST_TEST(sim.cached[6] == 8);
  BOOST_TEST(sim.pc().index().num_cached_blocks() == 3 * 2);
  const std::map<int64_t, int32_t> slots{{1, 0}, {2, 1}, {3, -1}, {4, 0}, {5, 1}, {6, -1}};
  BOOST_TEST(sim.adapter_of == slots);
}

// cache_salt: the same prompt under another salt (or none) reuses nothing, under the same salt and
// adapter its blocks; a salt and an adapter together key apart from either alone.
BOOST_AUTO_TEST_CASE(blocks_are_shared_only_under_the_same_cache_salt) {
  paged_sim sim(prefix_config(), 48, 4);
  auto p = tokens_from(100, 10);
  sim.add(1, p, 2, false, -1, -1, "tenant-a");
  sim.run();
  sim.add(2, p, 2, false, -1, -1, "tenant-b");
  sim.run();
  sim.add(3, p, 2);
  sim.run();
  sim.add(4, p, 2, false, -1, /*adapter=*/0, "tenant-a");
  sim.run();
  for (int64_t id : {1, 2, 3, 4}) BOOST_TEST(sim.cached[id] == 0, "sequence " << id);
  sim.add(5, p, 2, false, -1, -1, "tenant-a");
  sim.add(6, p, 2, false, -1, -1, "tenant-b");
  sim.add(7, p, 2);
  sim.add(8, p, 2, false, -1, 0, "tenant-a");
  sim.run();
  for (int64_t id : {5, 6, 7, 8}) BOOST_TEST(sim.cached[id] == 8, "sequence " << id);
  BOOST_TEST(sim.pc().index().num_cached_blocks() == 4 * 2);
}

// A request that wants every prompt row's logits (prompt_logprobs) computes its whole prompt even
// when the cache holds it, as vLLM skips the cache for it, and issues no remote look-up; what it
// computes is still cached for others.
BOOST_AUTO_TEST_CASE(prompt_logits_reuse_nothing_but_publish) {
  for (bool remote : {false, true}) {
    paged_sim sim(prefix_config(remote), 16, 4);
    auto p = tokens_from(100, 10);
    sim.add(1, p, 2);
    for (auto& l : sim.s.take_remote_lookups()) sim.s.resolve_remote(l.seq_id, {});
    sim.run();
    sim.add(2, p, 2, /*prompt_logits=*/true);
    BOOST_TEST(sim.s.take_remote_lookups().empty());
    BOOST_TEST(sim.step() == "2:0+10* ");
    BOOST_TEST(sim.cached[2] == 0);
    sim.run();
    sim.add(3, tokens_from(100, 13), 2);  // shares p's two full blocks, computed by 1 and 2
    for (auto& l : sim.s.take_remote_lookups()) sim.s.resolve_remote(l.seq_id, {});
    BOOST_TEST(sim.step() == "3:8+5* ");
    sim.run();
    sim.check_outputs();
  }
}

// Completions of one request (n > 1): the siblings wait while the first computes the prompt's
// full blocks, then start from them; without the wait all three would compute all of it.
BOOST_AUTO_TEST_CASE(siblings_wait_for_their_leaders_prompt) {
  auto cfg = prefix_config();
  cfg.max_num_batched_tokens = 4;  // the leader's prompt takes three steps
  paged_sim sim(cfg, 16, 4);
  auto p = tokens_from(100, 10);
  sim.add(1, p, 3);
  sim.add(2, p, 3, false, /*leader=*/1);
  sim.add(3, p, 3, false, /*leader=*/1);
  BOOST_TEST(sim.step() == "1:0+4 ");
  BOOST_TEST(sim.step() == "1:4+4 ");  // two of its blocks now computed and cached
  BOOST_TEST(sim.step() == "1:8+2* 2:8+2* ");  // the budget (4) leaves room for one sibling
  BOOST_TEST(sim.step() == "1:10+1* 2:10+1* 3:8+2* ");
  sim.run();
  BOOST_TEST(sim.cached[2] == 8);
  BOOST_TEST(sim.cached[3] == 8);
  sim.check_outputs();
}

// The wait ends when the leader leaves (cancelled here) and is not made for a prompt shorter
// than a block (nothing to share), nor by a scheduler without prefix caching.
BOOST_AUTO_TEST_CASE(siblings_wait_only_when_sharing_is_possible) {
  {
    paged_sim sim(prefix_config(), 16, 4);
    sim.add(1, tokens_from(100, 3), 2);
    sim.add(2, tokens_from(100, 3), 2, false, 1);
    BOOST_TEST(sim.step() == "1:0+3* 2:0+3* ");
  }
  {
    auto cfg = prefix_config();
    cfg.max_num_batched_tokens = 4;
    paged_sim sim(cfg, 16, 4);
    sim.add(1, tokens_from(100, 10), 2);
    sim.add(2, tokens_from(100, 10), 2, false, 1);
    BOOST_TEST(sim.step() == "1:0+4 ");
    BOOST_TEST(sim.s.finish(1, finish_reason::cancelled));
    BOOST_TEST(sim.step() == "2:4+4 ");  // from the leader's one computed block
  }
  {
    auto cfg = prefix_config();
    cfg.enable_prefix_caching = false;
    scheduler s(cfg, 16, 4);
    for (int64_t id : {1, 2}) {
      request_spec r;
      r.seq_id = id;
      r.prompt = tokens_from(100, 10);
      r.prompt_leader = id == 2 ? 1 : -1;
      BOOST_REQUIRE(s.add(std::move(r)).status == admit_status::ok);
    }
    BOOST_TEST(s.schedule().seqs.size() == 2u);
  }
}

BOOST_AUTO_TEST_CASE(a_prompt_of_whole_blocks_recomputes_its_last_block) {
  paged_sim sim(prefix_config(), 16, 4);
  auto p = tokens_from(100, 8);
  sim.add(1, p, 1);
  sim.run();
  sim.add(2, p, 1);
  BOOST_TEST(sim.step() == "2:4+4* ");
  sim.check_outputs();
}

BOOST_AUTO_TEST_CASE(sharing_with_a_running_sequence_counts_references) {
  paged_sim sim(prefix_config(), 16, 4);
  auto p = tokens_from(100, 9);
  sim.add(1, p, 10);
  sim.step();  // 1 prefills, registers blocks 0 and 1
  sim.add(2, p, 10);
  BOOST_TEST(sim.step() == "1:9+1* 2:8+1* ");
  BOOST_TEST(sim.s.allocator().ref_count(0) == 2);
  BOOST_TEST(sim.s.allocator().ref_count(1) == 2);
  BOOST_TEST(sim.table_of(2)[0] == 0);
  BOOST_TEST(sim.table_of(2)[1] == 1);
  sim.run();
  sim.check_outputs();
}

BOOST_AUTO_TEST_CASE(the_least_recently_freed_cached_blocks_are_evicted_first) {
  sched_config cfg = prefix_config();
  cfg.max_model_len = 16;
  paged_sim sim(cfg, 6, 4);
  auto a = tokens_from(100, 9), b = tokens_from(200, 9), c = tokens_from(300, 13);
  sim.add(1, a, 1);
  sim.run();  // a's blocks 0, 1 cached; 2 (partial) uncached; free list 3 4 5 2 1 0
  sim.add(2, b, 1);
  sim.run();  // b takes 3 4 5; free list 2 1 0 5 4 3; b's cached blocks: 3, 4
  BOOST_TEST(sim.s.allocator().free_list() == (ids{2, 1, 0, 5, 4, 3}), boost::test_tools::per_element());
  BOOST_TEST(sim.pc().index().num_cached_blocks() == 4);
  sim.add(3, c, 2);  // 4 fresh blocks: 2 1 0 5 -> evicts a's two blocks, keeps b's
  BOOST_TEST(sim.step() == "3:0+13* ");
  BOOST_TEST(sim.table_of(3) == (ids{2, 1, 0, 5}), boost::test_tools::per_element());
  BOOST_TEST(sim.pc().stats().evicted_blocks == 2);
  sim.run();
  sim.add(4, b, 1);
  BOOST_TEST(sim.step() == "4:8+1* ");  // b survived
  sim.run();
  sim.add(5, a, 1);
  BOOST_TEST(sim.step() == "5:0+9* ");  // a did not
  sim.run();
  sim.check_outputs();
}

BOOST_AUTO_TEST_CASE(a_hit_on_a_free_block_makes_it_recently_used) {
  sched_config cfg = prefix_config();
  cfg.max_model_len = 16;
  paged_sim sim(cfg, 6, 4);
  auto a = tokens_from(100, 5), b = tokens_from(200, 5);
  sim.add(1, a, 1);
  sim.run();  // a: block 0 cached; free 2 3 4 5 1 0
  sim.add(2, b, 1);
  sim.run();  // b: blocks 2 3; free 4 5 1 0 3 2
  sim.add(3, a, 2);  // reuses 0 (taken off the list) and takes 4
  BOOST_TEST(sim.step() == "3:4+1* ");
  BOOST_TEST(sim.table_of(3) == (ids{0, 4}), boost::test_tools::per_element());
  sim.run();  // frees 4 then 0: free 5 1 3 2 4 0 -> a's block is now the most recent
  BOOST_TEST(sim.s.allocator().free_list() == (ids{5, 1, 3, 2, 4, 0}), boost::test_tools::per_element());
  sim.check_outputs();
}

BOOST_AUTO_TEST_CASE(a_preempted_sequence_finds_its_blocks_again) {
  sched_config cfg = prefix_config();
  cfg.max_model_len = 16;
  paged_sim sim(cfg, 5, 4);  // 20 slots: two 5-token prompts growing to 16 cannot both fit
  sim.add(1, tokens_from(100, 5), 11);
  sim.add(2, tokens_from(200, 5), 11);
  for (int i = 0; i < 100 && !sim.s.idle(); ++i) sim.step();
  BOOST_TEST(sim.s.stats().num_preemptions > 0);
  sim.check_outputs();
  // The re-admission matched cached blocks of the preempted sequence's own prompt.
  BOOST_TEST(sim.pc().stats().num_queries == 2);  // counted once per sequence
}

BOOST_AUTO_TEST_CASE(remote_lookups_hold_admission_until_resolved) {
  paged_sim sim(prefix_config(true), 16, 4);
  auto p = tokens_from(100, 10);
  sim.add(1, p, 2);
  sim.add(2, tokens_from(500, 3), 2);  // shorter than a block: nothing to look up, admitted at once
  BOOST_TEST(sim.s.prefix_cache()->waiting_remote(1));
  BOOST_TEST(!sim.s.prefix_cache()->waiting_remote(2));
  BOOST_TEST(sim.step() == "2:0+3* ");
  auto lookups = sim.s.take_remote_lookups();
  BOOST_REQUIRE(lookups.size() == 1u);
  BOOST_TEST(lookups[0].seq_id == 1);
  BOOST_TEST(lookups[0].first_block == 0u);
  BOOST_REQUIRE(lookups[0].blocks.size() == 2u);
  const auto root = sim.pc().root();
  BOOST_TEST(lookups[0].blocks[0].parent == root);
  BOOST_TEST(lookups[0].blocks[0].hash == prefix::chain_hash(root, std::span(p).first(4)));
  BOOST_TEST(lookups[0].blocks[1].parent == lookups[0].blocks[0].hash);
  BOOST_TEST(lookups[0].blocks[1].tokens == std::vector<int32_t>(p.begin() + 4, p.begin() + 8),
             boost::test_tools::per_element());
  BOOST_TEST(sim.s.take_remote_lookups().empty());
  BOOST_TEST(sim.step() == "2:3+1* ");  // 1 still waits
  prefix::remote_blocks found;
  found.first_block = 0;
  found.payloads = {token_payload(std::span(p).first(4)), token_payload(std::span(p).subspan(4, 4))};
  sim.s.resolve_remote(1, found);
  BOOST_TEST(sim.step() == "1:8+2* ");
  BOOST_REQUIRE(sim.loads.size() == 2u);
  BOOST_TEST(sim.cached[1] == 8);
  sim.run();
  sim.check_outputs();
  BOOST_TEST(sim.pc().stats().remote_hit_tokens == 8);
  // Loaded blocks were registered after their step: a third request hits them locally, and
  // finds nothing left to look up remotely.
  sim.add(3, p, 1);
  BOOST_TEST(!sim.s.prefix_cache()->waiting_remote(3));
  BOOST_TEST(sim.step() == "3:8+2* ");
  sim.run();
  sim.s.resolve_remote(3, found);  // late or duplicate answers are ignored
  sim.s.resolve_remote(99, found);
}

BOOST_AUTO_TEST_CASE(steps_list_the_blocks_they_fill_for_publishing) {
  paged_sim sim(prefix_config(true), 16, 4);
  auto p = tokens_from(100, 10);
  sim.add(1, p, 4);
  sim.s.resolve_remote(1, {});  // the store had nothing
  BOOST_TEST(sim.s.take_remote_lookups().size() == 0u);  // resolved before it was taken: dropped
  BOOST_TEST(sim.step() == "1:0+10* ");
  BOOST_REQUIRE(sim.saves.size() == 2u);  // blocks 0 and 1 are full after the prefill
  BOOST_TEST(sim.saves[0].block == 0);
  BOOST_TEST(sim.saves[1].block == 1);
  BOOST_TEST(sim.saves[1].meta.hash == prefix::chain_hash(sim.saves[0].meta.hash, std::span(p).subspan(4, 4)));
  sim.run();  // decodes fill block 2 (positions 8..11) at position 11
  BOOST_REQUIRE(sim.saves.size() == 3u);
  BOOST_TEST(sim.saves[2].block == 2);
  BOOST_TEST(sim.saves[2].meta.tokens[3] == sim.out[1][1]);  // a generated token is part of it
  sim.check_outputs();
}

BOOST_AUTO_TEST_CASE(a_remote_answer_that_does_not_continue_the_local_chain_is_ignored) {
  paged_sim sim(prefix_config(true), 16, 4);
  auto p = tokens_from(100, 13);
  sim.add(1, p, 1);
  prefix::remote_blocks gap;
  gap.first_block = 1;  // block 0 is neither local nor fetched: block 1 cannot be used
  gap.payloads = {token_payload(std::span(p).subspan(4, 4))};
  sim.s.resolve_remote(1, gap);
  BOOST_TEST(sim.step() == "1:0+13* ");
  BOOST_TEST(sim.loads.empty());
  sim.check_outputs();
}

BOOST_AUTO_TEST_CASE(fetched_bytes_waiting_for_admission_are_bounded) {
  sched_config cfg = prefix_config(true);
  cfg.prefix_options.remote_block_bytes = 16;        // 4 tokens of 4 bytes in this simulation
  cfg.prefix_options.max_pending_remote_bytes = 40;  // room for one 2-block look-up, not two
  paged_sim sim(cfg, 16, 4);
  auto p = tokens_from(100, 10), q = tokens_from(300, 10);
  sim.add(1, p, 1);
  sim.add(2, q, 1);
  BOOST_TEST(sim.s.prefix_cache()->waiting_remote(1));
  BOOST_TEST(!sim.s.prefix_cache()->waiting_remote(2));  // skipped: it recomputes
  BOOST_TEST(sim.pc().pending_remote_bytes() == 32u);
  BOOST_TEST(sim.pc().stats().num_remote_skipped == 1);
  BOOST_TEST(sim.s.take_remote_lookups().size() == 1u);
  prefix::remote_blocks found;
  found.payloads = {token_payload(std::span(p).first(4))};
  sim.s.resolve_remote(1, found);
  BOOST_TEST(sim.pc().pending_remote_bytes() == 16u);  // what arrived, until admission
  sim.run();
  BOOST_TEST(sim.pc().pending_remote_bytes() == 0u);
  BOOST_TEST(sim.cached[1] == 4);
  sim.add(3, tokens_from(500, 10), 1);  // room again
  BOOST_TEST(sim.s.prefix_cache()->waiting_remote(3));
  BOOST_TEST(sim.s.finish(3, finish_reason::cancelled));  // a cancel releases its reservation
  BOOST_TEST(sim.pc().pending_remote_bytes() == 0u);
  sim.prompts.erase(3);
  sim.check_outputs();
}

BOOST_AUTO_TEST_CASE(a_lost_pool_forgets_every_cached_block) {
  paged_sim sim(prefix_config(), 16, 4);
  auto p = tokens_from(100, 10);
  sim.add(1, p, 1);
  sim.run();
  sim.add(2, p, 8);
  BOOST_TEST(sim.step() == "2:8+2* ");
  BOOST_TEST(sim.pc().index().num_cached_blocks() == 2);
  // The executor died: its pool (K/V of every block) is gone; the scheduler requeues and the
  // new pool starts empty.
  sim.s.requeue_running();
  std::fill(sim.pool.begin(), sim.pool.end(), -1);
  BOOST_TEST(sim.pc().index().num_cached_blocks() == 0);
  BOOST_TEST(sim.step() == "2:0+11* ");  // prompt and its first output token, recomputed
  sim.run();
  sim.check_outputs();
}

BOOST_AUTO_TEST_CASE(random_shared_prefix_workloads_match_the_reference) {
  // Conversations that resend their history, over a small pool (eviction and preemption), with
  // and without a simulated shared store that answers late, partially, or not at all.
  for (bool remote : {false, true}) {
    for (uint32_t seed = 1; seed <= 12; ++seed) {
      std::mt19937 rng(seed);
      sched_config cfg = prefix_config(remote);
      cfg.max_model_len = 64;
      cfg.max_num_batched_tokens = 1 + rng() % 40;
      cfg.max_num_seqs = 1 + rng() % 6;
      paged_sim sim(cfg, 20 + static_cast<int32_t>(rng() % 10), 4);
      std::map<int64_t, std::vector<int32_t>> store;  // chain of a prompt -> "published" blocks
      std::vector<std::vector<int32_t>> histories(3);
      for (auto& h : histories) h = tokens_from(static_cast<int32_t>(rng() % 5) * 100, 6);  // shared system prompt
      std::vector<std::pair<int64_t, int>> pending;  // (seq, steps left before its answer)
      int64_t next = 1;
      for (int round = 0; round < 40; ++round) {
        if (rng() % 3 == 0) {
          auto& h = histories[rng() % histories.size()];
          std::vector<int32_t> turn = h;
          for (int i = 0, n = 1 + static_cast<int>(rng() % 6); i < n; ++i) turn.push_back(static_cast<int32_t>(rng() % 50));
          if (turn.size() > 50) turn.resize(6);
          h = turn;
          sim.add(next++, turn, 1 + static_cast<int32_t>(rng() % 5));
        }
        for (auto& q : sim.s.take_remote_lookups()) pending.push_back({q.seq_id, static_cast<int>(rng() % 3)});
        for (auto it = pending.begin(); it != pending.end();) {
          if (it->second-- > 0) {
            ++it;
            continue;
          }
          // Answer with the true tokens of a random-length leading part of what was asked
          // (the store may hold fewer blocks), or with nothing.
          prefix::remote_blocks found;
          auto p = sim.prompts[it->first];
          const size_t bs = 4;
          size_t cap = (p.size() - 1) / bs;
          found.first_block = cap == 0 ? 0 : rng() % (cap + 1);
          size_t n = found.first_block < cap ? rng() % (cap - found.first_block + 1) : 0;
          for (size_t b = found.first_block; b < found.first_block + n; ++b)
            found.payloads.push_back(token_payload(std::span(p).subspan(b * bs, bs)));
          sim.s.resolve_remote(it->first, std::move(found));
          it = pending.erase(it);
        }
        sim.step();
      }
      for (int i = 0; i < 2000 && !sim.s.idle(); ++i) {
        for (auto& q : sim.s.take_remote_lookups()) sim.s.resolve_remote(q.seq_id, {});
        for (auto& q : pending) sim.s.resolve_remote(q.first, {});
        pending.clear();
        sim.step();
      }
      BOOST_REQUIRE(sim.s.idle());
      sim.check_outputs();
      BOOST_TEST(sim.s.allocator().num_free_blocks() == sim.s.allocator().num_total_blocks());
      BOOST_TEST_MESSAGE("remote " << remote << " seed " << seed << ": hit tokens " << sim.pc().stats().hit_tokens
                                   << " of " << sim.pc().stats().query_tokens << ", remote "
                                   << sim.pc().stats().remote_hit_tokens);
    }
  }
}

// Scheduling policies see the cached prefix (seq_view::num_cached_tokens): what cache-aware
// orders by. Before admission it is what the sequence would reuse now, after it what it reused.
struct recording_policy final : policy {
  std::map<int64_t, int32_t>* seen;
  explicit recording_policy(std::map<int64_t, int32_t>* s) : seen(s) {}
  std::string_view name() const noexcept override { return "recording"; }
  bool before(const seq_view& a, const seq_view& b) const noexcept override { return a.arrival < b.arrival; }
  void on_waiting(const seq_view& v) override { (*seen)[v.seq_id] = v.num_cached_tokens; }
};

BOOST_AUTO_TEST_CASE(policies_see_the_cached_prefix) {
  std::map<int64_t, int32_t> seen;
  auto cfg = prefix_config();
  scheduler s(cfg, 32, 4, std::make_unique<recording_policy>(&seen));
  auto run = [&] {
    for (int i = 0; i < 100 && !s.idle(); ++i) {
      auto plan = s.schedule();
      std::vector<int32_t> sampled(static_cast<size_t>(plan.num_sampled), 7);
      s.update(plan, sampled);
    }
  };
  auto spec = [](int64_t id, std::vector<int32_t> p) {
    request_spec r;
    r.seq_id = id;
    r.prompt = std::move(p);
    r.max_tokens = 1;
    return r;
  };
  BOOST_REQUIRE(s.add(spec(1, tokens_from(100, 10))).status == admit_status::ok);
  BOOST_TEST(seen[1] == 0);
  run();
  auto shared = tokens_from(100, 9);  // blocks [100..103], [104..107] are cached now
  shared.push_back(5);
  shared.push_back(6);
  BOOST_REQUIRE(s.add(spec(2, shared)).status == admit_status::ok);
  BOOST_REQUIRE(s.add(spec(3, tokens_from(500, 10))).status == admit_status::ok);
  BOOST_TEST(seen[2] == 8);
  BOOST_TEST(seen[3] == 0);
  s.check_invariants();
  // Without prefix caching the field stays 0.
  std::map<int64_t, int32_t> off_seen;
  auto off = prefix_config();
  off.enable_prefix_caching = false;
  scheduler plain(off, 32, 4, std::make_unique<recording_policy>(&off_seen));
  BOOST_REQUIRE(plain.add(spec(1, tokens_from(100, 10))).status == admit_status::ok);
  BOOST_TEST(off_seen[1] == 0);
}

BOOST_AUTO_TEST_SUITE_END()
