// The serving core without actors: the scheduler plans, the batch executor runs the engine and
// samples, and every request must get exactly the tokens the single-request generator (what
// `troupe generate` runs) gives it alone — greedy and seeded, with chunked prefill, with a pool
// so small that sequences are preempted and recomputed, and with requests cancelled mid-way.
#include <boost/test/unit_test.hpp>

#include <map>
#include <set>
#include <random>

#include "runtime/engine/generator.hpp"
#include "runtime/model/checkpoint.hpp"
#include "runtime/serve/batch_executor.hpp"

using namespace troupe;
using namespace troupe::serve;

namespace {

std::shared_ptr<const checkpoint> tiny_dense() {
  static std::shared_ptr<const checkpoint> ck = load_checkpoint(TROUPE_TEST_DATA_DIR "/golden/tiny-dense");
  return ck;
}

struct test_request {
  std::vector<int32_t> prompt;
  sampling_params sampling;
  int32_t max_tokens;
};

std::vector<test_request> make_requests(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<test_request> out;
  for (int i = 0; i < n; ++i) {
    test_request r;
    int len = 1 + static_cast<int>(rng() % 40);
    for (int k = 0; k < len; ++k) r.prompt.push_back(static_cast<int32_t>(rng() % 4000));
    r.sampling = defaults_from(tiny_dense()->generation);
    if (i % 2 == 0) {
      r.sampling.temperature = 0;  // greedy
    } else {
      r.sampling.temperature = 0.9f;
      r.sampling.seed = 1000 + static_cast<uint64_t>(i);
      r.sampling.has_seed = true;
    }
    r.sampling.ignore_eos = true;  // full lengths: the comparison covers every step
    r.max_tokens = 4 + static_cast<int32_t>(rng() % 12);
    out.push_back(r);
  }
  return out;
}

std::vector<int32_t> reference(const test_request& r) {
  generator g(*tiny_dense());
  generate_options o;
  o.max_tokens = r.max_tokens;
  o.sampling = r.sampling;
  return g.generate(r.prompt, o).ids;
}

struct run_result {
  std::map<int64_t, std::vector<int32_t>> out;
  std::map<int64_t, std::vector<token_logprobs>> prompt_logprobs;
  std::map<int64_t, std::vector<float>> embeddings;
  int64_t preemptions = 0;
  int steps = 0;
  int64_t accepted = 0;  // draft tokens the model agreed with
  int64_t drafted = 0;   // draft tokens the steps carried
  int64_t cached = 0;    // prompt tokens that came from the prefix cache
};

// embed: the requests that are embedding requests (request_spec::embed, default options).
run_result serve_all(const std::vector<test_request>& reqs, sched::sched_config cfg, int32_t num_blocks,
                     const std::map<int64_t, int>& cancel_at_step = {}, int32_t prompt_logprobs = -1,
                     const std::set<size_t>& embed = {}, std::shared_ptr<const checkpoint> draft = nullptr) {
  sched::scheduler s(cfg, num_blocks, 16);
  batch_executor ex(tiny_dense(), num_blocks, 16);
  if (draft)
    ex.set_draft(std::make_unique<draft_proposer>(make_cpu_backend(draft, num_blocks, 16), tiny_dense()->config.vocab_size));
  std::map<int64_t, std::shared_ptr<seq_sampling>> samplers;
  for (size_t i = 0; i < reqs.size(); ++i) {
    sched::request_spec spec;
    spec.seq_id = static_cast<int64_t>(i);
    spec.prompt = reqs[i].prompt;
    spec.max_tokens = reqs[i].max_tokens;
    spec.prompt_logits = prompt_logprobs >= 0;
    spec.embed = embed.count(i) != 0;
    BOOST_REQUIRE(s.add(spec).status == sched::admit_status::ok);
    samplers[spec.seq_id] = std::make_shared<seq_sampling>(reqs[i].sampling, reqs[i].prompt);
    samplers[spec.seq_id]->prompt_logprobs = prompt_logprobs;
    if (spec.embed) samplers[spec.seq_id]->embed = embedding_options{};
  }
  run_result res;
  while (!s.idle()) {
    BOOST_REQUIRE(res.steps < 2000);
    for (const auto& [id, step] : cancel_at_step)
      if (step == res.steps) s.finish(id, sched::finish_reason::cancelled);
    step_job job;
    job.plan = s.schedule();
    s.check_invariants();
    if (job.plan.empty()) continue;  // everything left was cancelled
    for (size_t i = 0; i < job.plan.seqs.size(); ++i) {
      const auto& e = job.plan.seqs[i];
      if (job.plan.batch[i].logits == logits_mode::all && e.num_draft == 0)
        job.prompt_scorers.push_back(samplers.at(e.seq_id));
      if (e.sample) job.samplers.push_back(samplers.at(e.seq_id));
    }
    auto outcome = ex.run(job);
    BOOST_REQUIRE_MESSAGE(outcome.step_error.empty(), outcome.step_error);
    BOOST_REQUIRE(outcome.seq_errors.empty());
    for (auto& [id, lps] : outcome.prompt_logprobs)
      res.prompt_logprobs[id].insert(res.prompt_logprobs[id].end(), lps.begin(), lps.end());
    for (auto& [id, v] : outcome.embeddings) {
      BOOST_TEST(!res.embeddings.count(id), "request " << id << " embedded twice");
      res.embeddings[id] = std::move(v);
    }
    BOOST_REQUIRE_MESSAGE(outcome.draft_error.empty(), outcome.draft_error);
    for (size_t i = 0; i < outcome.counts.size(); ++i) res.accepted += outcome.counts[i] - 1;
    for (const auto& e : job.plan.seqs) {
      res.drafted += e.num_draft;
      if (e.first_scheduled) res.cached += e.num_cached_tokens;
    }
    for (const auto& ev : s.update(job.plan, outcome.sampled, outcome.counts))
      res.out[ev.seq_id].insert(res.out[ev.seq_id].end(), ev.tokens.begin(), ev.tokens.end());
    for (auto& [id, guesses] : outcome.proposals) s.propose(id, std::move(guesses));
    s.check_invariants();
    ++res.steps;
  }
  BOOST_TEST(s.allocator().num_free_blocks() == num_blocks);
  res.preemptions = s.stats().num_preemptions;
  return res;
}

void expect_reference_outputs(const std::vector<test_request>& reqs, const run_result& r) {
  for (size_t i = 0; i < reqs.size(); ++i) {
    BOOST_TEST_CONTEXT("request " << i << (i % 2 ? " (seeded)" : " (greedy)")) {
      auto it = r.out.find(static_cast<int64_t>(i));
      BOOST_REQUIRE(it != r.out.end());
      BOOST_TEST(it->second == reference(reqs[i]), boost::test_tools::per_element());
    }
  }
}

sched::sched_config cfg(int32_t seqs, int32_t tokens, int32_t max_len) {
  sched::sched_config c;
  c.max_num_seqs = seqs;
  c.max_num_batched_tokens = tokens;
  c.max_model_len = max_len;
  return c;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(batch_executor_suite)

BOOST_AUTO_TEST_CASE(batched_requests_match_each_request_alone) {
  auto reqs = make_requests(12, 1);
  auto r = serve_all(reqs, cfg(16, 256, 128), 64);
  BOOST_TEST(r.preemptions == 0);
  expect_reference_outputs(reqs, r);
}

BOOST_AUTO_TEST_CASE(chunked_prefill_matches) {
  auto reqs = make_requests(6, 2);
  auto r = serve_all(reqs, cfg(8, 8, 128), 64);  // prompts up to 40 tokens in chunks of <= 8
  expect_reference_outputs(reqs, r);
}

BOOST_AUTO_TEST_CASE(preemption_by_recomputation_matches) {
  auto reqs = make_requests(10, 3);
  auto r = serve_all(reqs, cfg(10, 64, 64), 4);  // 4 blocks of 16: one max_model_len sequence
  BOOST_TEST_MESSAGE("preemptions: " << r.preemptions << " in " << r.steps << " steps");
  BOOST_TEST(r.preemptions > 0);
  expect_reference_outputs(reqs, r);
}

// Speculative decoding: with prompt-lookup drafts (random-weight outputs loop, so many are right)
// every request still gets exactly the generator's tokens, in fewer steps; also while a small
// pool preempts sequences and with logprobs-free seeded sampling beside greedy.
BOOST_AUTO_TEST_CASE(drafts_verified_by_the_engine_change_no_token) {
  auto reqs = make_requests(8, 4);
  for (auto& r : reqs) r.max_tokens = 48;
  auto plain = serve_all(reqs, cfg(8, 256, 128), 64);
  auto c = cfg(8, 256, 128);
  c.speculative = {4, 2, 4};
  auto spec = serve_all(reqs, c, 64);
  BOOST_TEST(plain.accepted == 0);
  BOOST_TEST(spec.accepted > 0);
  BOOST_TEST(spec.steps < plain.steps);
  expect_reference_outputs(reqs, spec);
  auto tight = serve_all(reqs, c, 8);  // 8 blocks of 16: two max_model_len sequences
  BOOST_TEST(tight.preemptions > 0);
  BOOST_TEST(tight.accepted > 0);
  expect_reference_outputs(reqs, tight);
}

// A draft model: the target's own weights guess every greedy token right (each step then carries
// all its drafts and confirms them); another model (tiny-moe, same vocabulary) guesses worse. Either
// way every request gets exactly the generator's tokens, also when a small pool preempts sequences
// (the draft's K/V are recomputed with the target's) and with chunked prefill.
BOOST_AUTO_TEST_CASE(draft_model_guesses_change_no_token) {
  auto reqs = make_requests(8, 5);
  for (auto& r : reqs) r.max_tokens = 40;
  auto c = cfg(8, 256, 128);
  c.speculative.num_tokens = 3;
  c.draft_model = true;
  auto plain = serve_all(reqs, cfg(8, 256, 128), 64);
  auto self = serve_all(reqs, c, 64, {}, -1, {}, tiny_dense());
  expect_reference_outputs(reqs, self);
  BOOST_TEST(self.drafted > 0);
  BOOST_TEST_MESSAGE("self-draft: " << self.accepted << " of " << self.drafted << " drafts, " << self.steps
                                    << " steps (plain " << plain.steps << ")");
  BOOST_TEST(self.steps < plain.steps / 2);

  // Greedy requests alone: a draft equal to the target is right every time.
  std::vector<test_request> greedy;
  for (size_t i = 0; i < reqs.size(); i += 2) greedy.push_back(reqs[i]);
  auto g = serve_all(greedy, c, 64, {}, -1, {}, tiny_dense());
  expect_reference_outputs(greedy, g);
  BOOST_TEST(g.accepted == g.drafted);

  std::shared_ptr<const checkpoint> other_model = load_checkpoint(TROUPE_TEST_DATA_DIR "/golden/tiny-moe");
  auto other = serve_all(reqs, c, 64, {}, -1, {}, other_model);
  expect_reference_outputs(reqs, other);
  BOOST_TEST_MESSAGE("tiny-moe draft: " << other.accepted << " of " << other.drafted << " drafts");
  BOOST_TEST(other.accepted < other.drafted);

  auto tight = serve_all(reqs, c, 8, {}, -1, {}, tiny_dense());  // 8 blocks of 16: preemption
  BOOST_TEST(tight.preemptions > 0);
  BOOST_TEST(tight.accepted > 0);
  expect_reference_outputs(reqs, tight);

  auto chunked = c;
  chunked.max_num_batched_tokens = 8;  // prompts in chunks; drafts squeezed by the budget
  auto ch = serve_all(reqs, chunked, 64, {}, -1, {}, tiny_dense());
  BOOST_TEST(ch.accepted > 0);
  expect_reference_outputs(reqs, ch);
}

// The draft's K/V follow the model's into the local prefix cache: requests sharing a long prompt
// prefix start from cached blocks, and a draft equal to the model still guesses every greedy token
// right (it reads its own K/V of those blocks, written when they were first computed).
BOOST_AUTO_TEST_CASE(draft_model_reads_its_own_kv_of_cached_prefix_blocks) {
  std::mt19937 rng(6);
  std::vector<int32_t> shared;
  for (int k = 0; k < 48; ++k) shared.push_back(static_cast<int32_t>(rng() % 4000));
  std::vector<test_request> reqs;
  for (int i = 0; i < 6; ++i) {
    test_request r;
    r.prompt = shared;
    for (int k = 0; k <= i; ++k) r.prompt.push_back(static_cast<int32_t>(rng() % 4000));
    r.sampling = defaults_from(tiny_dense()->generation);
    r.sampling.temperature = 0;
    r.sampling.ignore_eos = true;
    r.max_tokens = 24;
    reqs.push_back(r);
  }
  auto c = cfg(2, 256, 128);  // two at a time: the later ones find the prefix cached
  c.speculative.num_tokens = 3;
  c.draft_model = true;
  c.enable_prefix_caching = true;
  c.prefix_identity.model_fingerprint = "tiny-dense";
  auto r = serve_all(reqs, c, 64, {}, -1, {}, tiny_dense());
  expect_reference_outputs(reqs, r);
  BOOST_TEST(r.cached >= 4 * 48);  // the last four started from the cached prefix's three blocks
  BOOST_TEST(r.drafted > 0);
  BOOST_TEST(r.accepted == r.drafted);
}

// prompt_logprobs: each prompt token's, given the ones before it, exactly as from the logits the
// single-request generator computes for the whole prompt (`troupe logits`), reported once even
// when chunks are capped and sequences are preempted and recomputed; outputs are unchanged.
BOOST_AUTO_TEST_CASE(prompt_logprobs_match_the_prompt_logits_once_each) {
  auto reqs = make_requests(10, 3);
  auto c = cfg(10, 64, 64);
  c.max_prompt_logits_chunk = 7;
  auto r = serve_all(reqs, c, 4, {}, /*prompt_logprobs=*/3);
  BOOST_TEST(r.preemptions > 0);
  expect_reference_outputs(reqs, r);
  generator g(*tiny_dense());
  const int64_t vocab = tiny_dense()->config.vocab_size;
  for (size_t i = 0; i < reqs.size(); ++i) {
    BOOST_TEST_CONTEXT("request " << i) {
      const auto& prompt = reqs[i].prompt;
      const auto& got = r.prompt_logprobs[static_cast<int64_t>(i)];
      BOOST_REQUIRE_EQUAL(got.size(), prompt.size() - 1);
      const auto logits = g.prompt_logits(prompt);
      for (size_t p = 1; p < prompt.size(); ++p) {
        const std::span<const float> row(logits.data() + (p - 1) * vocab, static_cast<size_t>(vocab));
        const auto want = logprobs_of(row, prompt[p], 3);
        BOOST_TEST(std::abs(got[p - 1].logprob - want.logprob) < 1e-6, "position " << p);
        BOOST_REQUIRE_EQUAL(got[p - 1].top.size(), 3u);
        BOOST_TEST(got[p - 1].top[0].first == want.top[0].first);
      }
    }
  }
}

// Embedding requests share steps with generating ones (chunked prefill, a pool small enough to
// preempt): each gets one embedding, bit for bit what the generator gives its prompt alone
// (troupe embed), and no token; the others still get exactly their reference tokens.
BOOST_AUTO_TEST_CASE(embedding_requests_get_the_embedding_of_their_prompt_alone) {
  auto reqs = make_requests(10, 5);
  const std::set<size_t> embed{1, 4, 7, 8};
  auto r = serve_all(reqs, cfg(10, 24, 64), 4, {}, -1, embed);
  BOOST_TEST(r.preemptions > 0);
  generator g(*tiny_dense());
  for (size_t i = 0; i < reqs.size(); ++i) {
    BOOST_TEST_CONTEXT("request " << i) {
      const auto id = static_cast<int64_t>(i);
      if (embed.count(i)) {
        BOOST_TEST((!r.out.count(id) || r.out.at(id).empty()));
        BOOST_REQUIRE(r.embeddings.count(id));
        BOOST_TEST(r.embeddings.at(id) == g.embed(reqs[i].prompt, embedding_options{}), boost::test_tools::per_element());
      } else {
        BOOST_TEST(!r.embeddings.count(id));
        BOOST_TEST(r.out.at(id) == reference(reqs[i]), boost::test_tools::per_element());
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(cancelled_requests_free_their_blocks_and_others_are_unaffected) {
  auto reqs = make_requests(8, 4);
  auto r = serve_all(reqs, cfg(8, 64, 128), 32, {{1, 2}, {4, 3}, {6, 0}});
  for (size_t i = 0; i < reqs.size(); ++i) {
    if (i == 1 || i == 4 || i == 6) continue;
    BOOST_TEST_CONTEXT("request " << i) {
      BOOST_TEST(r.out[static_cast<int64_t>(i)] == reference(reqs[i]), boost::test_tools::per_element());
    }
  }
  BOOST_TEST(r.out.count(6) == 0u);  // cancelled before it ever ran
}

BOOST_AUTO_TEST_CASE(a_bad_batch_is_a_step_error_not_a_crash) {
  batch_executor ex(tiny_dense(), 4, 16);
  sched::scheduler s(cfg(4, 64, 64), 4, 16);
  sched::request_spec spec;
  spec.seq_id = 1;
  spec.prompt = {5000};  // outside the vocabulary: the engine refuses the batch
  spec.max_tokens = 2;
  BOOST_REQUIRE(s.add(spec).status == sched::admit_status::ok);
  step_job job;
  job.plan = s.schedule();
  sampling_params p;
  job.samplers.push_back(std::make_shared<seq_sampling>(p, spec.prompt));
  auto out = ex.run(job);
  BOOST_TEST(!out.step_error.empty());
  BOOST_TEST_MESSAGE(out.step_error);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(rebuild_sampling_suite)

BOOST_AUTO_TEST_CASE(a_rebuilt_sampler_continues_the_same_stream) {
  // Seeded sampling on random rows: sample 6 tokens; rebuild after 3 (as after an executor
  // failure) and the last 3 must be the same.
  auto p = defaults_from(tiny_dense()->generation);
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.seed = 99;
  p.has_seed = true;
  p.presence_penalty = 0.5f;
  std::mt19937 rng(5);
  std::vector<std::vector<float>> rows(6, std::vector<float>(64));
  for (auto& r : rows)
    for (auto& x : r) x = static_cast<float>(rng() % 1000) / 250.0f;
  auto run = [&](serve::seq_sampling& s, size_t from, size_t to) {
    std::vector<int32_t> got;
    for (size_t i = from; i < to; ++i) {
      auto row = rows[i];
      got.push_back(s.smp.sample(row, s.prompt, s.output));
      s.output.push_back(got.back());
    }
    return got;
  };
  seq_sampling a(p, {1, 2, 3});
  auto all = run(a, 0, 6);
  seq_sampling b(p, {1, 2, 3});
  auto first = run(b, 0, 3);
  run(b, 3, 4);  // a token sampled in a step whose result was lost: b's RNG is one draw ahead
  auto rebuilt = rebuild_sampling(b, first);
  auto rest = run(*rebuilt, 3, 6);
  first.insert(first.end(), rest.begin(), rest.end());
  BOOST_TEST(first == all, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()
