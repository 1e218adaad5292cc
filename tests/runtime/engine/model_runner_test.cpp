// The forward step against the float64 golden references (tests/data/README.md): every stored
// logits row within 1e-4 relative, greedy continuations identical, decode through the KV cache
// equal to the reference's full recomputation; plus batch and chunking invariance, bit for bit.
#define BOOST_TEST_MODULE troupe_engine
#include <boost/test/unit_test.hpp>
#include <boost/test/data/test_case.hpp>

#include <cstring>
#include <memory>
#include <numeric>

#include "runtime/core/error.hpp"
#include "runtime/engine/generator.hpp"
#include "runtime/engine/model_runner.hpp"
#include "tests/runtime/engine/batch_invariance.hpp"
#include "tests/runtime/engine/cached_decode.hpp"
#include "tests/runtime/engine/golden.hpp"

using namespace troupe;
using namespace troupe::testing;

namespace {

// Documented in tests/data/README.md: ~40x the float32 noise, below every typical mistake.
constexpr double kTolerance = 1e-4;

}  // namespace

BOOST_DATA_TEST_CASE(prompt_logits_match_reference, boost::unit_test::data::make(kGoldenSets), set) {
  auto ck = golden_checkpoint(set);
  generator gen(*ck);
  const int64_t vocab = ck->config.vocab_size;
  double worst = 0;
  for (const auto& c : load_golden(set)) {
    auto logits = gen.prompt_logits(c.prompt);
    worst = std::max(worst, check_prompt_logits(logits, c, vocab, kTolerance, set));
  }
  BOOST_TEST_MESSAGE(set << ": worst relative logits error " << worst << " (tolerance " << kTolerance << ")");
}

BOOST_DATA_TEST_CASE(greedy_decode_matches_reference, boost::unit_test::data::make(kGoldenSets), set) {
  auto ck = golden_checkpoint(set);
  for (const auto& c : load_golden(set)) {
    // The runner driven directly, so every decode step's logits are compared.
    const auto got = check_cached_decode(*ck, c, set, kTolerance);
    BOOST_TEST(got == c.greedy, boost::test_tools::per_element());
  }
}

BOOST_DATA_TEST_CASE(generator_greedy_equals_reference, boost::unit_test::data::make(kGoldenSets), set) {
  auto ck = golden_checkpoint(set);
  generator gen(*ck);
  for (const auto& c : load_golden(set)) {
    generate_options o;
    o.max_tokens = static_cast<int32_t>(c.greedy.size());
    o.sampling.temperature = 0.0f;
    o.prefill_chunk = 5;  // chunked prefill must not change the result
    auto out = gen.generate(c.prompt, o);
    BOOST_TEST(out.ids == c.greedy, boost::test_tools::per_element());
    BOOST_TEST(out.finish_reason == "length");
  }
}

// Speculative decoding in the generator: drafts that are the right continuation with every
// third one wrong (so steps accept some and reject others) change no id, greedy or seeded, and
// save steps.
BOOST_DATA_TEST_CASE(generator_with_drafts_gives_the_same_ids, boost::unit_test::data::make(kGoldenSets), set) {
  auto ck = golden_checkpoint(set);
  generator gen(*ck);
  for (const auto& c : load_golden(set)) {
    for (bool seeded : {false, true}) {
      generate_options o;
      o.max_tokens = static_cast<int32_t>(c.greedy.size());
      o.sampling.temperature = seeded ? 0.9f : 0.0f;
      o.sampling.seed = 5;
      o.sampling.has_seed = true;
      o.sampling.ignore_eos = true;
      const auto plain = gen.generate(c.prompt, o);
      if (!seeded) BOOST_TEST(plain.ids == c.greedy, boost::test_tools::per_element());
      int64_t calls = 0;
      o.propose = [&](std::span<const int32_t> context, int32_t max_drafts) {
        const size_t done = context.size() - c.prompt.size();
        std::vector<int32_t> d;
        for (size_t k = done; k < plain.ids.size() && static_cast<int32_t>(d.size()) < std::min(max_drafts, 3); ++k)
          d.push_back(++calls % 3 == 0 ? (plain.ids[k] + 1) % static_cast<int32_t>(ck->config.vocab_size) : plain.ids[k]);
        return d;
      };
      const auto spec = gen.generate(c.prompt, o);
      BOOST_TEST(spec.ids == plain.ids, boost::test_tools::per_element());
      BOOST_TEST(spec.decode_steps + spec.accepted_drafts == plain.decode_steps);
      if (plain.ids.size() > 4) BOOST_TEST(spec.accepted_drafts > 0);
    }
  }
}

// Batch invariance: every golden prompt in one batch, with blocks scattered through the pool,
// gives logits bit-identical to the prompt alone.
BOOST_DATA_TEST_CASE(batch_invariance_bitwise, boost::unit_test::data::make(kGoldenSets), set) {
  check_batch_invariance(*golden_checkpoint(set), load_golden(set), set);
}

// Chunking invariance: the longest prompt prefilled in chunks of 1, 7 and 16 gives the same
// bits at every position as one step.
BOOST_DATA_TEST_CASE(chunking_invariance_bitwise, boost::unit_test::data::make(kGoldenSets), set) {
  auto ck = golden_checkpoint(set);
  auto cases = load_golden(set);
  const auto& prompt = cases.back().prompt;
  generator gen(*ck);
  auto whole = gen.prompt_logits(prompt);
  for (int32_t chunk : {1, 7, 16}) {
    auto chunked = gen.prompt_logits(prompt, chunk);
    BOOST_REQUIRE_EQUAL(chunked.size(), whole.size());
    BOOST_TEST(std::memcmp(chunked.data(), whole.data(), whole.size() * sizeof(float)) == 0,
               set << ": chunk " << chunk << " changes the logits");
  }
}

BOOST_AUTO_TEST_CASE(bad_batches_are_refused_before_any_work) {
  auto ck = golden_checkpoint("tiny-dense");
  kv_cache kv(ck->config, 4);
  model_runner runner(*ck, kv);
  step_result r;
  std::vector<int32_t> table{0, 1}, ok_tokens{1, 2, 3}, bad_id{1, 4096}, none;
  auto expect = [&](step_sequence sq, errc code, const std::string& needle) {
    try {
      runner.step(std::span<const step_sequence>(&sq, 1), r);
      BOOST_FAIL("expected an error containing '" << needle << "'");
    } catch (const troupe::error& e) {
      BOOST_TEST(static_cast<int>(e.code()) == static_cast<int>(code));
      BOOST_TEST(std::string(e.what()).find(needle) != std::string::npos, e.what());
    }
  };
  expect({7, none, 0, table}, errc::invalid_input, "sequence 7 has no tokens");
  expect({1, bad_id, 0, table}, errc::out_of_range, "token id 4096 is outside the vocabulary");
  expect({1, ok_tokens, 30, table}, errc::invalid_input, "block table has 2 blocks");
  std::vector<int32_t> bad_table{0, 9};
  expect({1, ok_tokens, 14, bad_table}, errc::out_of_range, "block id 9 is outside the KV pool");
  expect({1, ok_tokens, 40958, table}, errc::out_of_range, "reaches position 40961");
}
