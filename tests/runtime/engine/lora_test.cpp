// The forward step with LoRA adapters against PEFT's own float64 run of them
// (tools/reference/lora_golden.py): logits within the golden tolerance, greedy ids identical,
// decode through the KV cache equal to PEFT's recomputation; and a sequence's bits independent of
// the adapters (or none) of the sequences beside it and of its prompt's chunking.
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstring>
#include <map>
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

constexpr double kTolerance = 1e-4;  // the golden sets' (tests/data/README.md)

// Each set: tiny-dense or tiny-moe (linked) with adapter/ saved by PEFT.
const char* kLoraSets[] = {"tiny-dense-lora", "tiny-dense-lora-rs", "tiny-moe-lora"};

std::shared_ptr<const lora_adapter> adapter(const std::string& set, const model_config& cfg) {
  return std::make_shared<lora_adapter>(load_lora_adapter(golden_dir(set) + "/adapter", cfg));
}

std::vector<int32_t> identity_table(int64_t n) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), 0);
  return t;
}

}  // namespace

BOOST_DATA_TEST_CASE(lora_prompt_logits_match_peft, boost::unit_test::data::make(kLoraSets), set) {
  auto ck = golden_checkpoint(set);
  auto a = adapter(set, ck->config);
  generator gen(*ck);
  const int64_t vocab = ck->config.vocab_size;
  double worst = 0;
  for (const auto& c : load_golden(set)) {
    auto logits = gen.prompt_logits(c.prompt, 7, dtype::f32, {kernels::compute_dtype::f32}, a);
    worst = std::max(worst, check_prompt_logits(logits, c, vocab, kTolerance, set));
  }
  BOOST_TEST_MESSAGE(set << ": worst relative logits error " << worst << " (tolerance " << kTolerance << ")");
}

// The bf16 compute mode rounds the base model's activations only (the adapter's matmuls stay f32):
// the logits keep bf16_compute_test's bound against PEFT's float64 run, and the adapter still
// decides the tokens.
BOOST_AUTO_TEST_CASE(lora_in_the_bf16_compute_mode) {
  const std::string set = "tiny-dense-lora";
  auto ck = golden_checkpoint(set);
  auto a = adapter(set, ck->config);
  generator gen(*ck);
  const int64_t vocab = ck->config.vocab_size;
  double worst = 0;
  int64_t rows = 0, top1 = 0;
  for (const auto& c : load_golden(set)) {
    const auto fast = gen.prompt_logits(c.prompt, 0, dtype::f32, {kernels::compute_dtype::bf16}, a);
    for (size_t r = 0; r < c.prompt_logits.index.size(); ++r) {
      const float* got = fast.data() + c.prompt_logits.index[r] * vocab;
      const float* ref = c.prompt_logits.data.data() + r * vocab;
      worst = std::max(worst, row_error(got, ref, vocab));
      top1 += std::max_element(got, got + vocab) - got == std::max_element(ref, ref + vocab) - ref;
      ++rows;
    }
  }
  BOOST_TEST(worst <= 0.04, "bf16 with LoRA: worst relative error " << worst);  // bf16_compute_test's bound
  BOOST_TEST(worst > 1e-4, "the bf16 mode was not on: " << worst);
  BOOST_TEST(static_cast<double>(top1) >= 0.95 * static_cast<double>(rows), top1 << " of " << rows << " top-1");
}

BOOST_DATA_TEST_CASE(lora_decode_through_the_cache_matches_peft, boost::unit_test::data::make(kLoraSets), set) {
  auto ck = golden_checkpoint(set);
  auto a = adapter(set, ck->config);
  for (const auto& c : load_golden(set)) {
    BOOST_REQUIRE_EQUAL(c.decode_logits.index.size(), c.greedy.size());  // every step is checked
    const auto got = check_cached_decode(*ck, c, set, kTolerance, a);
    BOOST_TEST(got == c.greedy, boost::test_tools::per_element());
  }
}

BOOST_DATA_TEST_CASE(lora_generate_gives_peft_greedy_ids, boost::unit_test::data::make(kLoraSets), set) {
  auto ck = golden_checkpoint(set);
  generator gen(*ck);
  for (const auto& c : load_golden(set)) {
    generate_options o;
    o.max_tokens = static_cast<int32_t>(c.greedy.size());
    o.sampling.temperature = 0.0f;
    o.prefill_chunk = 5;
    o.adapter = adapter(set, ck->config);
    BOOST_TEST(gen.generate(c.prompt, o).ids == c.greedy, boost::test_tools::per_element());
    o.adapter = nullptr;  // the base model's tokens differ: the adapter is what made them
    BOOST_TEST(gen.generate(c.prompt, o).ids != c.greedy);
  }
}

// Two adapters and the base model in one step, blocks scattered, each prompt twice (once per
// neighbour mix): every sequence's logits equal, bit for bit, its prompt run alone with its
// adapter; and a prompt prefilled in chunks of 5 ends with the same last row.
BOOST_AUTO_TEST_CASE(lora_mixed_adapters_in_one_batch_are_bitwise_invariant) {
  auto ck = golden_checkpoint("tiny-dense");
  kv_cache kv(ck->config, 128);
  model_runner runner(*ck, kv);
  const int32_t s1 = runner.add_adapter(adapter("tiny-dense-lora", ck->config));
  const int32_t s2 = runner.add_adapter(adapter("tiny-dense-lora-rs", ck->config));
  check_mixed_adapter_invariance_on(runner, kv.num_blocks(), ck->config.vocab_size, load_golden("tiny-dense-lora"),
                                    {-1, s1, s2}, "one runner");
}

BOOST_AUTO_TEST_CASE(lora_unknown_adapter_slots_are_refused) {
  auto ck = golden_checkpoint("tiny-dense");
  kv_cache kv(ck->config, 4);
  model_runner runner(*ck, kv);
  auto table = identity_table(4);
  const std::vector<int32_t> ids{1, 2, 3};
  step_result r;
  for (int32_t bad : {0, -2}) {
    step_sequence sq{7, ids, 0, table, logits_mode::last, bad};
    try {
      runner.step(std::span<const step_sequence>(&sq, 1), r);
      BOOST_ERROR("slot " << bad << " accepted");
    } catch (const troupe::error& e) {
      BOOST_TEST(to_string(e.code()) == to_string(errc::out_of_range));
      const std::string expected = std::string("sequence 7 asks for LoRA adapter slot ") + std::to_string(bad);
      BOOST_TEST(std::string(e.what()).find(expected) !=
                 std::string::npos, e.what());
    }
  }
  runner.add_adapter(adapter("tiny-dense-lora", ck->config));
  step_sequence ok{7, ids, 0, table, logits_mode::last, 0};
  runner.step(std::span<const step_sequence>(&ok, 1), r);
  BOOST_TEST(r.num_rows[0] == 1);
  // An adapter loaded for a model with another layer count is refused.
  BOOST_CHECK_THROW(runner.add_adapter(std::make_shared<lora_adapter>(lora_adapter{})), troupe::error);
}

// Adapters put into slots while a server runs (set_adapter): a slot set past the end leaves the
// ones before it empty, an emptied slot is refused naming why, and an adapter in a later slot
// gives, bit for bit, what it gives in slot 0.
BOOST_AUTO_TEST_CASE(lora_adapters_set_and_emptied_by_slot) {
  auto ck = golden_checkpoint("tiny-dense");
  kv_cache kv(ck->config, 8);
  model_runner one(*ck, kv), other(*ck, kv);
  const auto a = adapter("tiny-dense-lora", ck->config);
  one.add_adapter(a);
  other.set_adapter(3, a);
  BOOST_TEST(other.num_adapters() == 4);
  auto table = identity_table(4);
  const std::vector<int32_t> ids{1, 2, 3};
  step_result r1, r2;
  step_sequence in0{7, ids, 0, table, logits_mode::last, 0}, in3{7, ids, 0, table, logits_mode::last, 3};
  one.step(std::span<const step_sequence>(&in0, 1), r1);
  other.step(std::span<const step_sequence>(&in3, 1), r2);
  BOOST_TEST(r1.logits == r2.logits);
  for (int32_t empty : {1, 3}) {
    if (empty == 3) other.set_adapter(3, nullptr);
    step_sequence sq{7, ids, 0, table, logits_mode::last, empty};
    try {
      other.step(std::span<const step_sequence>(&sq, 1), r2);
      BOOST_ERROR("empty slot " << empty << " accepted");
    } catch (const troupe::error& e) {
      BOOST_TEST(to_string(e.code()) == to_string(errc::out_of_range));
      BOOST_TEST(std::string(e.what()).find("which is empty") != std::string::npos, e.what());
    }
  }
  BOOST_CHECK_THROW(other.set_adapter(-1, a), troupe::error);
}
