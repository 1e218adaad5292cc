// Scheduler: per-step decisions for simulated workloads written as tables, with the invariants
// checked after every schedule() and update(). A plan is written "id:start+n" per sequence, "*"
// when the step samples a token for it, and "!id" for a sequence preempted while planning.
// The simulated model's next token is a function of the sequence's whole history, so a
// recomputed (preempted) sequence must produce exactly the tokens it would have alone.
#define BOOST_TEST_MODULE scheduler
#include <boost/test/unit_test.hpp>

#include <map>
#include <set>
#include <random>
#include <sstream>

#include "runtime/core/error.hpp"
#include "runtime/sched/scheduler.hpp"

using namespace troupe::sched;

namespace {

int32_t fake_model(int64_t seq, std::span<const int32_t> history) {
  uint64_t h = 1469598103934665603ull ^ static_cast<uint64_t>(seq);
  for (int32_t t : history) h = (h ^ static_cast<uint64_t>(t)) * 1099511628211ull;
  return static_cast<int32_t>(h % 1000) + 1000;  // never collides with the stop id 7 used below
}

request_spec req(int64_t id, int32_t prompt_len, int32_t max_tokens, int32_t priority = 0) {
  request_spec r;
  r.seq_id = id;
  for (int32_t i = 0; i < prompt_len; ++i) r.prompt.push_back(static_cast<int32_t>(10 + i + 100 * id));
  r.max_tokens = max_tokens;
  r.priority = priority;
  return r;
}

struct sim {
  scheduler s;
  std::map<int64_t, std::vector<int32_t>> out;
  std::map<int64_t, finish_reason> done;
  std::map<int64_t, int32_t> all_rows;  // rows asked for by logits_mode::all, per sequence
  std::map<int64_t, int32_t> hidden_rows;  // logits_mode::hidden entries (embedding requests)
  std::map<int64_t, int32_t> last_rows;    // logits_mode::last entries

  sim(sched_config cfg, int32_t blocks, int32_t block_size, std::unique_ptr<policy> p = nullptr)
      : s(cfg, blocks, block_size, std::move(p)) {}

  void add(request_spec r) {
    auto a = s.add(std::move(r));
    BOOST_REQUIRE_MESSAGE(a.status == admit_status::ok, a.message);
  }

  std::string step() {
    auto plan = s.schedule();
    s.check_invariants();
    std::ostringstream d;
    for (int64_t p : plan.preempted) d << "!" << p << " ";
    std::vector<int32_t> sampled;
    BOOST_REQUIRE_EQUAL(plan.batch.size(), plan.seqs.size());
    for (size_t i = 0; i < plan.seqs.size(); ++i) {
      const auto& e = plan.seqs[i];
      const auto& b = plan.batch[i];
      d << e.seq_id << ":" << e.start_pos << "+" << e.num_tokens << (e.sample ? "*" : "") << " ";
      // The batch entry is the sequence's own tokens and covers every position it touches.
      auto all = s.tokens(e.seq_id);
      BOOST_REQUIRE(b.seq_id == e.seq_id && b.start_pos == e.start_pos);
      BOOST_REQUIRE(std::equal(b.tokens.begin(), b.tokens.end(), all.begin() + e.start_pos));
      BOOST_REQUIRE(b.block_table.size() * 1u >= size_t((e.start_pos + e.num_tokens + s.allocator().block_size() - 1) /
                                                       s.allocator().block_size()));
      // A sampled entry has its last row; only prompt_logits chunks (never decodes) have all rows.
      BOOST_REQUIRE(e.sample ? b.logits != troupe::logits_mode::none : b.logits != troupe::logits_mode::last);
      if (b.logits == troupe::logits_mode::all) {
        BOOST_REQUIRE(e.start_pos + 1 < s.num_prompt_tokens(e.seq_id));
        all_rows[e.seq_id] += e.num_tokens;
      }
      if (b.logits == troupe::logits_mode::last) ++last_rows[e.seq_id];
      if (b.logits == troupe::logits_mode::hidden) {  // only where a prompt ends
        BOOST_REQUIRE(e.sample && e.start_pos + e.num_tokens == s.num_prompt_tokens(e.seq_id));
        ++hidden_rows[e.seq_id];
      }
      if (e.sample) sampled.push_back(fake_model(e.seq_id, all.first(static_cast<size_t>(e.start_pos + e.num_tokens))));
    }
    for (const auto& ev : s.update(plan, sampled)) {
      out[ev.seq_id].insert(out[ev.seq_id].end(), ev.tokens.begin(), ev.tokens.end());
      if (ev.finished) done[ev.seq_id] = *ev.finished;
    }
    s.check_invariants();
    auto str = d.str();
    if (!str.empty()) str.pop_back();
    return str;
  }

  // Steps until idle (bounded), returning the plan of each step.
  std::vector<std::string> run(int max_steps = 1000) {
    std::vector<std::string> steps;
    while (!s.idle() && max_steps-- > 0) steps.push_back(step());
    BOOST_REQUIRE(s.idle());
    BOOST_TEST(s.allocator().num_free_blocks() == s.allocator().num_total_blocks());
    return steps;
  }
};

// What a sequence generates alone: the reference for every batched / preempted run.
std::vector<int32_t> alone(const request_spec& r) {
  std::vector<int32_t> hist = r.prompt, out;
  for (int32_t i = 0; i < r.max_tokens; ++i) {
    out.push_back(fake_model(r.seq_id, hist));
    hist.push_back(out.back());
    if (std::find(r.stop_ids.begin(), r.stop_ids.end(), out.back()) != r.stop_ids.end()) break;
  }
  return out;
}

sched_config cfg(int32_t seqs, int32_t tokens, int32_t max_len = 64) {
  sched_config c;
  c.max_num_seqs = seqs;
  c.max_num_batched_tokens = tokens;
  c.max_model_len = max_len;
  return c;
}

void expect_steps(const std::vector<std::string>& got, const std::vector<std::string>& want) {
  BOOST_TEST(got == want, boost::test_tools::per_element());
}

}  // namespace

BOOST_AUTO_TEST_CASE(two_prompts_prefill_together_then_decode_until_length) {
  sim t(cfg(4, 16), 16, 4);
  t.add(req(1, 4, 3));
  t.add(req(2, 3, 2));
  expect_steps(t.run(), {"1:0+4* 2:0+3*", "1:4+1* 2:3+1*", "1:5+1*"});
  BOOST_TEST(t.out[1] == alone(req(1, 4, 3)), boost::test_tools::per_element());
  BOOST_TEST(t.out[2] == alone(req(2, 3, 2)), boost::test_tools::per_element());
  BOOST_TEST((t.done[1] == finish_reason::length && t.done[2] == finish_reason::length));
}

BOOST_AUTO_TEST_CASE(new_request_joins_the_running_batch_at_the_next_step) {
  sim t(cfg(4, 16), 16, 4);
  t.add(req(1, 2, 4));
  BOOST_TEST(t.step() == "1:0+2*");
  t.add(req(2, 3, 2));
  BOOST_TEST(t.step() == "1:2+1* 2:0+3*");
  BOOST_TEST(t.step() == "1:3+1* 2:3+1*");
  BOOST_TEST(t.step() == "1:4+1*");
  BOOST_TEST(t.s.idle());
}

BOOST_AUTO_TEST_CASE(chunked_prefill_never_stalls_decodes) {
  // Budget 8: the running decode always gets its token; the 20-token prompt takes the rest.
  sim t(cfg(4, 8), 16, 4);
  t.add(req(1, 3, 6));
  BOOST_TEST(t.step() == "1:0+3*");
  t.add(req(2, 20, 2));
  expect_steps(t.run(), {"1:3+1* 2:0+7", "1:4+1* 2:7+7", "1:5+1* 2:14+6*", "1:6+1* 2:20+1*", "1:7+1*"});
  BOOST_TEST(t.out[2] == alone(req(2, 20, 2)), boost::test_tools::per_element());
  BOOST_TEST(t.out[1] == alone(req(1, 3, 6)), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(long_prefill_threshold_caps_one_sequence_chunk) {
  auto c = cfg(4, 16);
  c.long_prefill_token_threshold = 5;
  sim t(c, 16, 4);
  t.add(req(1, 12, 1));
  t.add(req(2, 4, 1));
  expect_steps(t.run(), {"1:0+5 2:0+4*", "1:5+5", "1:10+2*"});
}

// prompt_logprobs: every prompt chunk asks for all its rows, in chunks of at most
// max_prompt_logits_chunk tokens; decodes ask for the last row as usual; others are unchanged.
BOOST_AUTO_TEST_CASE(prompt_logits_chunks_ask_for_every_row) {
  auto c = cfg(4, 64);
  c.max_prompt_logits_chunk = 5;
  sim t(c, 32, 4);
  auto r = req(1, 12, 2);
  r.prompt_logits = true;
  t.add(r);
  t.add(req(2, 12, 1));
  expect_steps(t.run(), {"1:0+5 2:0+12*", "1:5+5", "1:10+2*", "1:12+1*"});
  BOOST_TEST(t.all_rows[1] == 12);  // every prompt row, none of the decode
  BOOST_TEST(t.all_rows[2] == 0);
  BOOST_TEST(t.out[1] == alone(r), boost::test_tools::per_element());
}

// Embedding requests (request_spec::embed): the chunk that ends the prompt asks for its last
// hidden state, and the sequence finishes there (stop, no token, blocks freed) while a generating
// request beside it goes on unchanged. Its last token alone in a step is no decode: no drafts, even
// with speculative decoding on and a prompt that repeats (a generating twin gets drafts there).
BOOST_AUTO_TEST_CASE(embedding_requests_end_at_their_prompt_with_its_hidden_state) {
  auto c = cfg(4, 8);
  c.speculative.num_tokens = 3;
  const std::vector<int32_t> looping{5, 6, 5, 6, 5, 6, 5, 6, 5};
  {
    sim t(c, 16, 4);
    request_spec e = req(1, 0, 4);
    e.prompt = looping;
    e.embed = true;
    t.add(e);
    expect_steps(t.run(), {"1:0+8", "1:8+1*"});
    BOOST_TEST(t.out[1].empty());
    BOOST_TEST((t.done.at(1) == finish_reason::stop));
    BOOST_TEST(t.hidden_rows[1] == 1);
  }
  {  // the twin that generates is given drafts for the same last token
    scheduler s(c, 16, 4);
    request_spec g = req(1, 0, 4);
    g.prompt = looping;
    BOOST_REQUIRE(s.add(g).status == admit_status::ok);
    const auto first = s.schedule();
    BOOST_REQUIRE(first.seqs.size() == 1u && !first.seqs[0].sample);
    s.update(first, {});
    const auto second = s.schedule();
    BOOST_REQUIRE(second.seqs.size() == 1u);
    BOOST_TEST(second.seqs[0].num_draft > 0);
  }
  {
    sim t(cfg(4, 64), 32, 4);
    request_spec e = req(1, 10, 4);
    e.embed = true;
    t.add(e);
    t.add(req(2, 3, 4));
    expect_steps(t.run(), {"1:0+10* 2:0+3*", "2:3+1*", "2:4+1*", "2:5+1*"});
    BOOST_TEST(t.out[1].empty());
    BOOST_TEST(t.hidden_rows[1] == 1);
    BOOST_TEST(t.hidden_rows[2] == 0);
    BOOST_TEST(t.out[2] == alone(req(2, 3, 4)), boost::test_tools::per_element());
  }
  {  // a rerank document (embed_from_logits): the same end, with the last token's logits row
    sim t(cfg(4, 64), 32, 4);
    request_spec k = req(1, 10, 4);
    k.embed = true;
    k.embed_from_logits = true;
    t.add(k);
    expect_steps(t.run(), {"1:0+10*"});
    BOOST_TEST(t.out[1].empty());
    BOOST_TEST((t.done.at(1) == finish_reason::stop));
    BOOST_TEST(t.hidden_rows[1] == 0);
    BOOST_TEST(t.last_rows[1] == 1);
  }
  scheduler s(cfg(4, 64), 32, 4);
  request_spec both = req(3, 5, 2);
  both.embed = true;
  both.prompt_logits = true;
  const auto a = s.add(both);
  BOOST_TEST((a.status == admit_status::invalid));
  BOOST_TEST(a.message.find("embedding request") != std::string::npos, a.message);
}

BOOST_AUTO_TEST_CASE(prefill_beside_decodes_is_capped_and_alone_is_not) {
  auto c = cfg(4, 16);
  c.max_prefill_tokens_while_decoding = 3;
  sim alone_run(c, 32, 4);
  alone_run.add(req(1, 12, 1));  // nothing decodes: the whole budget
  expect_steps(alone_run.run(), {"1:0+12*"});

  sim t(c, 32, 4);
  t.add(req(1, 2, 6));
  BOOST_TEST(t.step() == "1:0+2*");
  t.add(req(2, 10, 2));  // arrives while seq 1 decodes: 3 prompt tokens a step
  expect_steps(t.run(), {"1:2+1* 2:0+3", "1:3+1* 2:3+3", "1:4+1* 2:6+3", "1:5+1* 2:9+1*", "1:6+1* 2:10+1*"});
  BOOST_TEST(t.out[1] == alone(req(1, 2, 6)), boost::test_tools::per_element());
  BOOST_TEST(t.out[2] == alone(req(2, 10, 2)), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(sequence_limit_holds_back_admission_until_a_slot_frees) {
  sim t(cfg(2, 32), 16, 4);
  t.add(req(1, 2, 2));
  t.add(req(2, 2, 3));
  t.add(req(3, 2, 1));
  expect_steps(t.run(), {"1:0+2* 2:0+2*", "1:2+1* 2:2+1*", "2:3+1* 3:0+2*"});
}

BOOST_AUTO_TEST_CASE(without_chunked_prefill_a_prompt_waits_for_a_budget_that_holds_it) {
  auto c = cfg(4, 8, 8);
  c.enable_chunked_prefill = false;
  sim t(c, 16, 4);
  t.add(req(1, 3, 3));
  t.add(req(2, 7, 1));  // 7 > 8 - 3 - ... : cannot share the first step with seq 1's prompt
  expect_steps(t.run(), {"1:0+3*", "1:3+1* 2:0+7*", "1:4+1*"});
}

BOOST_AUTO_TEST_CASE(preemption_recomputes_and_still_gives_every_token) {
  // 4 blocks of 4 tokens: two sequences growing to 6 + 8 = 14 tokens cannot both stay.
  auto c = cfg(4, 32, 16);
  sim t(c, 4, 4);
  t.add(req(1, 6, 8));
  t.add(req(2, 6, 8));
  auto steps = t.run();
  expect_steps(steps, {
      "1:0+6* 2:0+6*",       // 2 blocks each: pool full
      "1:6+1* 2:6+1*",       // 7 tokens fit in 2 blocks
      "1:7+1* 2:7+1*",       // 8 tokens fit in 2 blocks
      "!2 1:8+1*",           // seq 1 needs a 3rd block: seq 2 (back of FCFS order) is preempted
      "1:9+1*",              // no admission while the pool is short; seq 2 waits
      "1:10+1*", "1:11+1*",
      "1:12+1*",             // seq 1 reaches 6 + 8 tokens and leaves
      "2:0+9*",              // seq 2 re-prefills prompt + its 3 tokens, samples the 4th
      "2:9+1*", "2:10+1*", "2:11+1*", "2:12+1*",
  });
  BOOST_TEST(t.s.stats().num_preemptions == 1);
  BOOST_TEST(t.out[1] == alone(req(1, 6, 8)), boost::test_tools::per_element());
  BOOST_TEST(t.out[2] == alone(req(2, 6, 8)), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(the_sequence_that_needs_a_block_is_the_victim_when_it_is_last) {
  // 3 blocks of 4. Seq 2 (last in FCFS order) needs its 2nd block while seq 1 holds the other
  // two: it preempts itself rather than an earlier sequence, and resumes when seq 1 is done.
  auto c = cfg(4, 32, 12);
  sim t(c, 3, 4);
  t.add(req(1, 5, 7));
  t.add(req(2, 4, 2));
  expect_steps(t.run(), {"1:0+5* 2:0+4*", "!2 1:5+1*", "1:6+1*", "1:7+1*", "1:8+1*", "1:9+1*",
                         "1:10+1*", "2:0+5*"});
  BOOST_TEST(t.out[1] == alone(req(1, 5, 7)), boost::test_tools::per_element());
  BOOST_TEST(t.out[2] == alone(req(2, 4, 2)), boost::test_tools::per_element());
  BOOST_TEST(t.s.stats().num_preemptions == 1);
}

BOOST_AUTO_TEST_CASE(stop_id_finishes_with_stop) {
  sim t(cfg(4, 16), 16, 4);
  auto r = req(1, 3, 10);
  auto ref = alone(r);
  r.stop_ids = {ref[2]};  // the third token is a stop id
  t.add(r);
  t.run();
  BOOST_TEST(t.out[1].size() == 3u);
  BOOST_TEST((t.done[1] == finish_reason::stop));
}

BOOST_AUTO_TEST_CASE(max_model_len_caps_generation_with_length) {
  sim t(cfg(4, 16, 8), 16, 4);
  t.add(req(1, 5, 100));
  t.run();
  BOOST_TEST(t.out[1].size() == 3u);  // 5 + 3 == max_model_len
  BOOST_TEST((t.done[1] == finish_reason::length));
}

BOOST_AUTO_TEST_CASE(admission_refuses_prompts_over_max_model_len_and_a_full_queue) {
  auto c = cfg(4, 16, 8);
  c.max_waiting = 2;
  scheduler s(c, 16, 4);
  auto a = s.add(req(1, 8, 1));
  BOOST_TEST((a.status == admit_status::prompt_too_long));
  BOOST_TEST(a.message == "prompt has 8 tokens; max_model_len is 8 (the prompt and at least one generated token must fit)");
  BOOST_TEST((s.add(req(2, 7, 1)).status == admit_status::ok));  // 7 + 1 fits exactly
  BOOST_TEST((s.add(req(3, 1, 1)).status == admit_status::ok));
  auto full = s.add(req(4, 1, 1));
  BOOST_TEST((full.status == admit_status::queue_full));
  BOOST_TEST(full.message.find("2 requests waiting") != std::string::npos);
  BOOST_TEST((s.add(req(2, 1, 1)).status == admit_status::invalid));  // duplicate id
  BOOST_TEST(s.stats().num_waiting == 2);
}

BOOST_AUTO_TEST_CASE(bad_configurations_are_errors_that_say_what_to_change) {
  try {
    scheduler s(cfg(4, 16, 100), 4, 16);
    BOOST_FAIL("expected an error");
  } catch (const troupe::error& e) {
    BOOST_TEST(std::string(e.what()) ==
               "the KV pool holds 64 tokens (4 blocks of 16), less than one max_model_len sequence (100): "
               "lower max_model_len or raise the KV-cache budget");
  }
  BOOST_CHECK_THROW(scheduler(cfg(0, 16), 16, 4), troupe::error);
  BOOST_CHECK_THROW(scheduler(cfg(4, 0), 16, 4), troupe::error);
  auto negative_cap = cfg(4, 16);
  negative_cap.max_prefill_tokens_while_decoding = -1;
  try {
    scheduler s(negative_cap, 16, 4);
    BOOST_FAIL("expected an error");
  } catch (const troupe::error& e) {
    BOOST_TEST(std::string(e.what()) == "max_prefill_tokens_while_decoding must be >= 0; got -1");
  }
}

BOOST_AUTO_TEST_CASE(cancel_frees_blocks_at_once_even_mid_step) {
  sim t(cfg(4, 16), 16, 4);
  t.add(req(1, 6, 10));
  t.add(req(2, 3, 10));
  BOOST_TEST(t.step() == "1:0+6* 2:0+3*");
  int32_t used = t.s.allocator().num_used_blocks();
  auto plan = t.s.schedule();          // step in flight...
  BOOST_TEST(t.s.finish(1, finish_reason::cancelled));  // ...when the client cancels
  BOOST_TEST(t.s.allocator().num_used_blocks() == used - 2);
  BOOST_TEST(!t.s.finish(1, finish_reason::cancelled));  // idempotent
  std::vector<int32_t> sampled(2, 1500);
  auto evs = t.s.update(plan, sampled);  // the cancelled sequence's token is dropped
  BOOST_REQUIRE_EQUAL(evs.size(), 1u);
  BOOST_TEST(evs[0].seq_id == 2);
  t.s.check_invariants();
  BOOST_TEST(t.s.finish(2, finish_reason::cancelled));
  BOOST_TEST(t.s.idle());
  BOOST_TEST(t.s.allocator().num_free_blocks() == 16);
}

BOOST_AUTO_TEST_CASE(cancel_a_waiting_request) {
  sim t(cfg(1, 16), 16, 4);
  t.add(req(1, 2, 3));
  t.add(req(2, 2, 3));
  BOOST_TEST(t.step() == "1:0+2*");
  BOOST_TEST(t.s.finish(2, finish_reason::cancelled));
  expect_steps(t.run(), {"1:2+1*", "1:3+1*"});
}

BOOST_AUTO_TEST_CASE(requeue_running_recomputes_everything_after_an_executor_failure) {
  sim t(cfg(4, 16), 16, 4);
  t.add(req(1, 3, 4));
  t.add(req(2, 2, 4));
  BOOST_TEST(t.step() == "1:0+3* 2:0+2*");
  BOOST_TEST(t.step() == "1:3+1* 2:2+1*");
  BOOST_TEST(t.s.requeue_running() == (std::vector<int64_t>{1, 2}), boost::test_tools::per_element());
  BOOST_TEST(t.s.allocator().num_free_blocks() == 16);
  t.s.check_invariants();
  expect_steps(t.run(), {"1:0+5* 2:0+4*", "1:5+1* 2:4+1*"});
  BOOST_TEST(t.out[1] == alone(req(1, 3, 4)), boost::test_tools::per_element());
  BOOST_TEST(t.out[2] == alone(req(2, 2, 4)), boost::test_tools::per_element());
}

// vLLM's reset_prefix_cache: refused while a sequence runs (its blocks are in the cache), done
// once nothing runs; nothing else changes.
BOOST_AUTO_TEST_CASE(reset_prefix_cache_only_while_nothing_runs) {
  sim t(cfg(4, 16), 16, 4);
  t.add(req(1, 3, 4));
  BOOST_TEST(t.step() == "1:0+3*");
  BOOST_TEST(!t.s.reset_prefix_cache());
  BOOST_TEST(t.s.has(1));
  t.s.check_invariants();
  t.run();
  BOOST_TEST(t.s.reset_prefix_cache());
  BOOST_TEST(t.s.allocator().num_free_blocks() == 16);
  t.s.check_invariants();
}

BOOST_AUTO_TEST_CASE(deadlines_expire_running_and_waiting_sequences) {
  sim t(cfg(1, 16), 16, 4);
  auto t0 = clock::now();
  auto a = req(1, 2, 50);
  a.deadline = t0 + std::chrono::milliseconds(10);
  auto b = req(2, 2, 50);
  b.deadline = t0 + std::chrono::milliseconds(20);
  auto c = req(3, 2, 2);
  t.add(a);
  t.add(b);
  t.add(c);
  BOOST_TEST(t.step() == "1:0+2*");
  BOOST_TEST(t.s.expire(t0 + std::chrono::milliseconds(5)).empty());
  BOOST_TEST(t.s.expire(t0 + std::chrono::milliseconds(20)) == (std::vector<int64_t>{1, 2}),
             boost::test_tools::per_element());
  expect_steps(t.run(), {"3:0+2*", "3:2+1*"});
}

BOOST_AUTO_TEST_CASE(static_batching_closes_the_batch_once_it_decodes) {
  auto c = cfg(4, 32);
  c.static_batching = true;
  sim t(c, 16, 4);
  t.add(req(1, 2, 3));
  t.add(req(2, 2, 1));
  BOOST_TEST(t.step() == "1:0+2* 2:0+2*");
  t.add(req(3, 2, 2));  // a free slot, but the batch is closed
  expect_steps(t.run(), {"1:2+1*", "1:3+1*", "3:0+2*", "3:2+1*"});
}

BOOST_AUTO_TEST_CASE(continuous_batching_fills_the_slot_at_once) {
  sim t(cfg(4, 32), 16, 4);
  t.add(req(1, 2, 3));
  t.add(req(2, 2, 1));
  BOOST_TEST(t.step() == "1:0+2* 2:0+2*");
  t.add(req(3, 2, 2));
  expect_steps(t.run(), {"1:2+1* 3:0+2*", "1:3+1* 3:2+1*"});
}

BOOST_AUTO_TEST_CASE(priority_policy_orders_admission_and_picks_the_victim) {
  auto c = cfg(4, 32, 16);
  sim t(c, 4, 4, make_policy("priority"));
  t.add(req(1, 6, 8, /*priority*/ 5));
  t.add(req(2, 6, 8, /*priority*/ 1));
  // Seq 2 is served first; when blocks run out, seq 1 (worse priority) is the victim.
  auto steps = t.run();
  BOOST_TEST(steps.at(0) == "2:0+6* 1:0+6*");
  BOOST_TEST(steps.at(3) == "!1 2:8+1*");
  BOOST_TEST(t.out[1] == alone(req(1, 6, 8)), boost::test_tools::per_element());
  BOOST_CHECK_THROW(make_policy("lottery"), troupe::error);
}

// max_loras: a sequence whose adapter would be one adapter too many waits, and so do the adapter
// sequences the policy orders after it (base-model ones are admitted), until a running adapter has
// drained; then it runs with the sequences of its own adapter.
BOOST_AUTO_TEST_CASE(max_loras_caps_the_running_adapters_and_lets_nobody_overtake) {
  auto c = cfg(8, 64);
  c.max_loras = 1;
  sim t(c, 32, 4);
  auto with = [](request_spec r, int32_t adapter) {
    r.adapter = adapter;
    return r;
  };
  t.add(with(req(1, 2, 3), 0));
  t.add(with(req(2, 2, 1), 0));   // the same adapter: joins
  t.add(with(req(3, 2, 1), 1));   // another: waits for adapter 0 to drain
  t.add(with(req(4, 2, 1), 0));   // adapter 0 again, but ordered after 3: waits too (then for 3)
  t.add(req(5, 2, 1));            // the base model: no adapter slot, admitted
  expect_steps(t.run(), {"1:0+2* 2:0+2* 5:0+2*", "1:2+1*", "1:3+1*", "3:0+2*", "4:0+2*"});
}

BOOST_AUTO_TEST_CASE(max_loras_two_admits_a_second_adapter_beside_the_first) {
  auto c = cfg(8, 64);
  c.max_loras = 2;
  sim t(c, 32, 4);
  for (int64_t id = 1; id <= 4; ++id) {
    auto r = req(id, 2, id == 1 ? 3 : 1);
    r.adapter = static_cast<int32_t>(id - 1) % 3;  // adapters 0, 1, 2, 0
    t.add(r);
  }
  expect_steps(t.run(), {"1:0+2* 2:0+2*", "1:2+1* 3:0+2* 4:0+2*", "1:3+1*"});
  auto bad = cfg(4, 16);
  bad.max_loras = -1;
  BOOST_CHECK_THROW(scheduler(bad, 16, 4), troupe::error);
}

BOOST_AUTO_TEST_CASE(random_workloads_keep_invariants_and_outputs) {
  int64_t total_preemptions = 0;
  for (int seed = 0; seed < 20; ++seed) {
    std::mt19937 rng(static_cast<unsigned>(seed));
    auto c = cfg(1 + static_cast<int32_t>(rng() % 6), 4 + static_cast<int32_t>(rng() % 40), 32);
    c.long_prefill_token_threshold = static_cast<int32_t>(rng() % 3) * 5;
    c.static_batching = rng() % 5 == 0;
    int32_t bs = 1 + static_cast<int32_t>(rng() % 8);
    int32_t blocks = (32 + bs - 1) / bs + static_cast<int32_t>(rng() % 12);
    // LoRA adapters under a cap (its own generator: the workloads above stay as they were).
    std::mt19937 lora_rng(static_cast<unsigned>(seed) + 1000);
    c.max_loras = static_cast<int32_t>(lora_rng() % 3);
    sim t(c, blocks, bs, seed % 2 ? make_policy("priority") : nullptr);
    std::map<int64_t, request_spec> reqs;
    int64_t next = 1;
    std::set<int64_t> cancelled;
    for (int step = 0; step < 400 && (next < 40 || !t.s.idle()); ++step) {
      if (next < 40 && rng() % 3 == 0) {
        auto r = req(next, 1 + static_cast<int32_t>(rng() % 25), 1 + static_cast<int32_t>(rng() % 12),
                     static_cast<int32_t>(rng() % 3));
        if (rng() % 4 == 0) r.stop_ids = {alone(r).back()};
        r.adapter = static_cast<int32_t>(lora_rng() % 4) - 1;
        reqs[next] = r;
        t.add(r);
        ++next;
      }
      if (rng() % 25 == 0 && !t.s.idle()) {
        auto ids = t.s.running_ids();
        if (!ids.empty() && t.s.finish(ids[0], finish_reason::cancelled)) cancelled.insert(ids[0]);
      }
      t.step();
    }
    BOOST_REQUIRE(t.s.idle());
    BOOST_TEST(t.s.allocator().num_free_blocks() == blocks);
    total_preemptions += t.s.stats().num_preemptions;
    for (const auto& [id, r] : reqs) {
      if (cancelled.count(id)) continue;
      BOOST_TEST_CONTEXT("seed " << seed << " seq " << id) {
        auto ref = alone(r);
        if (static_cast<int32_t>(r.prompt.size() + ref.size()) > 32) ref.resize(32 - r.prompt.size());
        BOOST_TEST(t.out[id] == ref, boost::test_tools::per_element());
      }
    }
  }
  BOOST_TEST_MESSAGE("preemptions over all seeds: " << total_preemptions);
  BOOST_TEST(total_preemptions > 20);  // the workloads really exercise recomputation
}
