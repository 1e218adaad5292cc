// Speculative decoding by prompt lookup through the scheduler, on the simulated paged pool
// (paged_sim.hpp): a stand-in model that falls into loops makes drafts that are mostly right and
// sometimes wrong, and every output must still equal plain one-token-at-a-time decoding (the
// pool's check catches K/V of a rejected draft being read as context). Drafts never exceed the
// budget, the length limit or the free blocks, never preempt, and never hold a stop id.
#include <boost/test/unit_test.hpp>

#include "runtime/sched/scheduler.hpp"
#include "tests/runtime/sched/paged_sim.hpp"

using namespace troupe;
using namespace troupe::sched;
using namespace troupe::sched::test;

namespace {

// Counts 500..508 round and round, but jumps ahead at every 13th position: text that repeats
// (drafts mostly right) with surprises (drafts rejected part way).
int32_t looping_model(std::span<const int32_t> context) {
  const auto n = context.size();
  const int32_t last = n > 0 ? context[n - 1] : 0;
  int32_t next = last >= 500 && last <= 508 ? (last - 500 + 1) % 9 : 0;
  if (n % 13 == 0) next = (next + 4) % 9;
  return 500 + next;
}

sched_config spec_config(int32_t k, bool prefix = false) {
  sched_config c;
  c.max_num_seqs = 8;
  c.max_num_batched_tokens = 64;
  c.max_model_len = 96;
  c.speculative = {k, 2, 4};
  c.enable_prefix_caching = prefix;
  c.prefix_identity.model_fingerprint = "sim-model";
  return c;
}

struct run_result {
  std::map<int64_t, std::vector<int32_t>> out;
  int steps = 0;
  int64_t drafted = 0, accepted = 0;
};

run_result run_all(sched_config cfg, int32_t blocks, int32_t max_tokens, int num_seqs) {
  paged_sim sim(cfg, blocks, 4);
  sim.model = looping_model;
  for (int i = 0; i < num_seqs; ++i) sim.add(i + 1, tokens_from(100 + 10 * i, 5 + i), max_tokens);
  run_result r;
  for (; r.steps < 2000 && !sim.s.idle(); ++r.steps) sim.step();
  BOOST_REQUIRE(sim.s.idle());
  sim.check_outputs();
  r.out = sim.out;
  r.drafted = sim.drafted;
  r.accepted = sim.accepted;
  return r;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(speculative)

BOOST_AUTO_TEST_CASE(outputs_equal_plain_decoding_in_fewer_steps) {
  for (bool prefix : {false, true}) {
    auto plain = run_all(spec_config(0, prefix), 64, 60, 3);
    auto spec = run_all(spec_config(4, prefix), 64, 60, 3);
    BOOST_TEST(plain.drafted == 0);
    for (const auto& [id, o] : plain.out) BOOST_TEST(spec.out[id] == o, boost::test_tools::per_element());
    BOOST_TEST(spec.accepted > 0);
    BOOST_TEST(spec.accepted < spec.drafted);  // some drafts were wrong: the rejection path ran
    BOOST_TEST(spec.steps * 2 < plain.steps, spec.steps << " steps with drafts, " << plain.steps << " without");
  }
}

// A pool with room for little more than one sequence: drafts take what is free and never
// preempt; preemption still happens for the decodes themselves, and outputs stay right.
BOOST_AUTO_TEST_CASE(drafts_use_free_blocks_only_and_survive_preemption) {
  auto plain = run_all(spec_config(0), 26, 85, 3);
  auto spec = run_all(spec_config(6), 26, 85, 3);
  for (const auto& [id, o] : plain.out) BOOST_TEST(spec.out[id] == o, boost::test_tools::per_element());
  BOOST_TEST(spec.accepted > 0);
}

BOOST_AUTO_TEST_CASE(drafts_fit_the_budget_and_the_length_limit) {
  auto cfg = spec_config(8);
  cfg.max_num_batched_tokens = 4;  // the token and at most three drafts
  paged_sim sim(cfg, 64, 4);
  sim.model = looping_model;
  sim.add(1, {500, 501, 500, 501, 500, 501}, 11);  // a prompt that already loops
  int steps = 0;
  for (; steps < 100 && !sim.s.idle(); ++steps) {
    auto plan = sim.s.schedule();
    for (const auto& e : plan.seqs) {
      BOOST_TEST(e.num_tokens <= 4);
      // All drafts plus the token after must fit max_tokens: prompt 6 + 11 = 17 tokens at most.
      if (e.num_draft > 0) BOOST_TEST(e.start_pos + e.num_tokens + 1 <= 17);
    }
    // Put it back: the simulation plans its own steps.
    std::vector<int32_t> sampled, counts;
    for (const auto& e : plan.seqs)
      if (e.sample) {
        sampled.push_back(looping_model(sim.s.tokens(e.seq_id)));
        counts.push_back(1);  // accept no draft: the slow path still ends right
      }
    sim.s.update(plan, sampled, counts);
    sim.s.check_invariants();
  }
  BOOST_TEST(sim.s.idle());
  BOOST_TEST(steps == 12);  // two for the prompt (4 + 2), then one token a step: every draft rejected
}

// Four decoding sequences, a budget of six: every step plans all four real tokens, so drafts get
// the two tokens left; after each step a sequence holds no block past its next token (the room
// of rejected drafts goes back at once).
BOOST_AUTO_TEST_CASE(drafts_never_take_a_decodes_budget_or_keep_blocks) {
  auto cfg = spec_config(4);
  cfg.max_num_batched_tokens = 6;
  paged_sim sim(cfg, 64, 4);
  sim.model = looping_model;
  for (int64_t id = 1; id <= 4; ++id) sim.add(id, {500, 501, 502}, 60);
  auto decoding = [&] {
    for (int64_t id : sim.s.running_ids())
      if (sim.s.num_computed_tokens(id) + 1 != static_cast<int32_t>(sim.s.tokens(id).size())) return false;
    return sim.s.running_ids().size() == 4u;
  };
  for (int i = 0; i < 20 && !decoding(); ++i) sim.step();
  BOOST_REQUIRE(decoding());
  for (int i = 0; i < 20; ++i) {
    const auto drafted = sim.drafted;
    auto d = sim.step();
    for (int64_t id = 1; id <= 4; ++id) BOOST_TEST(d.find(std::to_string(id) + ":") != std::string::npos, d);
    BOOST_TEST(sim.drafted - drafted <= 2, d);
    for (int64_t id : sim.s.running_ids())
      BOOST_TEST(sim.table_of(id).size() <=
                 static_cast<size_t>(sim.s.allocator().blocks_for_tokens(static_cast<int64_t>(sim.s.tokens(id).size()))));
  }
  BOOST_TEST(sim.drafted > 0);  // the outputs loop: the budget left was used for guesses
  sim.run();
  sim.check_outputs();
}

// A stop id is never drafted (nothing may be sampled after it): the prompt's cycle holds 507, a
// stop id, so the drafts end before it, and the model's own 507 ends the output as always.
BOOST_AUTO_TEST_CASE(drafts_end_before_a_stop_id) {
  paged_sim sim(spec_config(4), 64, 4);
  sim.model = looping_model;
  request_spec r;
  r.seq_id = 3;
  r.prompt = {500, 501, 502, 503, 504, 505, 506, 507, 508, 500, 501, 502, 503, 504};
  r.max_tokens = 40;
  r.stop_ids = {507};
  BOOST_REQUIRE(sim.s.add(std::move(r)).status == admit_status::ok);
  BOOST_TEST(sim.step() == "3:0+14* ");  // samples 505
  BOOST_TEST(sim.step() == "3:14+2* ");  // 505 and the draft 506 only: 507 would be next
  BOOST_TEST(sim.s.idle());
  BOOST_TEST(sim.out[3] == (std::vector<int32_t>{505, 506, 507}), boost::test_tools::per_element());
}

// The length limit can fall inside a run of accepted drafts' tokens: the drafts are sized so it
// is reached at most by the token after them, and the output ends exactly there.
BOOST_AUTO_TEST_CASE(the_length_limit_ends_a_run_of_accepted_drafts) {
  paged_sim sim(spec_config(4), 64, 4);
  sim.model = looping_model;
  sim.add(4, {500, 501, 502, 503, 504, 505, 506, 507, 508, 500, 501, 502, 503, 504}, 3);
  BOOST_TEST(sim.step() == "4:0+14* ");  // samples 505
  BOOST_TEST(sim.step() == "4:14+2* ");  // room for one draft: 505 506 and the token after
  BOOST_TEST(sim.s.idle());
  sim.check_outputs();
  BOOST_TEST(sim.out[4].size() == 3u);
  BOOST_TEST(sim.accepted == 1);
}

BOOST_AUTO_TEST_SUITE_END()
