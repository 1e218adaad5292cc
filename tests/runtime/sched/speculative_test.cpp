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

// A draft model's guesses (sched_config::draft_model): a sampling entry reserves num_lookahead
// positions past its chunk for the draft's own K/V (given back by update()), and what propose()
// hands in becomes the next decode's drafts, cut before a stop id and to the length limit, and
// dropped once update() has moved the sequence on.
BOOST_AUTO_TEST_CASE(draft_model_guesses_become_the_next_drafts) {
  auto cfg = spec_config(3);
  cfg.draft_model = true;
  scheduler s(cfg, 64, 4);
  request_spec r;
  r.seq_id = 1;
  r.prompt = {10, 11, 12, 13, 14, 15};
  r.max_tokens = 8;  // 14 tokens at most
  r.stop_ids = {99};
  BOOST_REQUIRE(s.add(std::move(r)).status == admit_status::ok);
  s.propose(1, {1, 2, 3});  // waiting: ignored
  s.propose(7, {1, 2, 3});  // unknown: ignored

  auto p1 = s.schedule();
  BOOST_REQUIRE(p1.seqs.size() == 1u);
  BOOST_TEST(p1.seqs[0].num_tokens == 6);
  BOOST_TEST(p1.seqs[0].num_draft == 0);
  BOOST_TEST(p1.seqs[0].num_lookahead == 3);
  BOOST_TEST(p1.batch[0].block_table.size() == 3u);  // positions 0..8: the prompt and 3 guesses
  s.update(p1, std::vector<int32_t>{20});
  s.check_invariants();
  BOOST_TEST(s.allocator().block_table(1).size() == 2u);  // back to the 7 tokens

  s.propose(1, {21, 22, 23});
  auto p2 = s.schedule();
  BOOST_TEST(p2.seqs[0].num_draft == 3);
  BOOST_TEST(std::vector<int32_t>(p2.batch[0].tokens.begin(), p2.batch[0].tokens.end()) ==
                 (std::vector<int32_t>{20, 21, 22, 23}),
             boost::test_tools::per_element());
  BOOST_TEST(p2.seqs[0].num_lookahead == 3);  // ends at 10: room for 4 more tokens
  BOOST_TEST(p2.batch[0].block_table.size() == 4u);
  s.update(p2, std::vector<int32_t>{21, 22, 30}, std::vector<int32_t>{3});  // two guesses held
  s.check_invariants();
  BOOST_TEST(s.num_computed_tokens(1) == 9);
  BOOST_TEST(s.tokens(1).size() == 10u);

  auto p3 = s.schedule();  // nothing proposed since: a plain decode
  BOOST_TEST(p3.seqs[0].num_draft == 0);
  BOOST_TEST(p3.seqs[0].num_lookahead == 3);
  s.update(p3, std::vector<int32_t>{31});

  s.propose(1, {32, 99, 33});  // a stop id ends the drafts
  auto p4 = s.schedule();
  BOOST_TEST(p4.seqs[0].num_draft == 1);
  BOOST_TEST(p4.seqs[0].num_lookahead == 1);  // the chunk ends at 12 of 14: its token and one guess
  s.update(p4, std::vector<int32_t>{40}, std::vector<int32_t>{1});  // the guess rejected
  s.propose(1, {41, 42, 43});
  auto p5 = s.schedule();  // 12 tokens of 14: one draft and the token after
  BOOST_TEST(p5.seqs[0].num_draft == 1);
  BOOST_TEST(p5.seqs[0].num_lookahead == 0);  // its token ends the sequence: nothing to guess for
  auto ev = s.update(p5, std::vector<int32_t>{41, 44}, std::vector<int32_t>{2});
  BOOST_REQUIRE(ev.size() == 1u);
  BOOST_TEST(ev[0].finished.has_value());  // the length limit
  BOOST_TEST(s.idle());
  BOOST_TEST(s.allocator().num_free_blocks() == 64);
}

// The adaptive draft length: a sequence whose guesses all fail stops guessing within a few steps,
// probes with one guess every 8 steps, and guesses the whole k again once guesses hold.
BOOST_AUTO_TEST_CASE(guesses_that_fail_stop_being_made) {
  auto cfg = spec_config(4);
  cfg.draft_model = true;
  cfg.draft_cost = 0.1;
  cfg.max_model_len = 512;
  scheduler s(cfg, 128, 4);
  request_spec r;
  r.seq_id = 1;
  r.prompt = {10, 11, 12};
  r.max_tokens = 200;
  BOOST_REQUIRE(s.add(std::move(r)).status == admit_status::ok);
  std::vector<int32_t> looks;
  int32_t next = 100;
  auto step = [&](bool hold) {
    auto p = s.schedule();
    BOOST_REQUIRE(p.seqs.size() == 1u);
    const auto& e = p.seqs[0];
    looks.push_back(e.num_lookahead);
    std::vector<int32_t> out;
    const auto drafts = p.batch[0].tokens.subspan(1);
    for (size_t j = 0; j < drafts.size() && hold; ++j) out.push_back(drafts[j]);
    out.push_back(next++);
    s.update(p, out, std::vector<int32_t>{static_cast<int32_t>(out.size())});
    if (e.num_lookahead > 0) {
      std::vector<int32_t> g;
      for (int32_t j = 0; j < e.num_lookahead; ++j) g.push_back(5000 + j);  // never what comes
      s.propose(1, std::move(g));
    }
    s.check_invariants();
  };
  for (int i = 0; i < 24; ++i) step(false);
  BOOST_TEST(looks[0] == 4);  // a new sequence guesses the whole k
  const auto stopped = std::find(looks.begin(), looks.end(), 0);
  BOOST_REQUIRE(bool(stopped != looks.end()));
  const auto steps_to_stop = stopped - looks.begin();
  BOOST_TEST(steps_to_stop <= 8);  // a few failed steps later it has stopped
  int probes = 0, quiet = 0;
  for (auto it = stopped; it != looks.end(); ++it) {
    if (*it == 0) {
      ++quiet;
      continue;
    }
    BOOST_TEST(*it == 1);      // a probe is one guess
    BOOST_TEST(quiet >= 8);    // after 8 steps without
    ++probes;
    quiet = 0;
  }
  BOOST_TEST(probes >= 1);
  for (int i = 0; i < 12; ++i) step(true);
  BOOST_TEST(looks.back() == 4);  // guesses that hold win the whole k back
}

// vLLM's disable_by_batch_size: while that many sequences run, steps carry no drafts (prompt
// lookup's, here) and no guesses; below it they do again.
BOOST_AUTO_TEST_CASE(large_batches_carry_no_drafts) {
  auto cfg = spec_config(4);
  cfg.speculation_max_running = 3;
  paged_sim sim(cfg, 64, 4);
  sim.model = looping_model;
  for (int64_t id = 1; id <= 3; ++id) sim.add(id, {500, 501, 502, 503, 504, 505, 506}, 30);
  for (int i = 0; i < 10; ++i) sim.step();
  BOOST_TEST(sim.drafted == 0);  // three running: none, though the text loops
  sim.s.finish(3, finish_reason::cancelled);
  for (int i = 0; i < 10; ++i) sim.step();
  BOOST_TEST(sim.drafted > 0);   // two running: drafts again
  sim.run();
}

BOOST_AUTO_TEST_SUITE_END()
