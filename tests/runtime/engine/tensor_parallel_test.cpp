// Tensor parallelism on CPU shards against the float64 golden references: every golden set
// (dense, untied and sharded, MoE, RoPE scaling) split over two ranks gives logits within the
// engine's 1e-4 and the reference's greedy tokens, decode through the ranks' KV pools included;
// a sequence's logits stay independent of its batch and of prompt chunking (bit for bit, for a
// given group size); quantized weights split as their scale groups allow; bad sizes are refused.
#define BOOST_TEST_MODULE troupe_tensor_parallel
#include <boost/test/unit_test.hpp>
#include <boost/test/data/test_case.hpp>

#include <cstring>
#include <map>
#include <memory>
#include <numeric>

#include "runtime/core/error.hpp"
#include "runtime/engine/generator.hpp"
#include "runtime/engine/omp_threads.hpp"
#include "runtime/engine/tensor_parallel_runner.hpp"
#include "runtime/lora/lora_adapter.hpp"
#include "runtime/model/shard.hpp"
#include "runtime/quant/load.hpp"
#include "tests/runtime/engine/batch_invariance.hpp"
#include "tests/runtime/engine/cached_decode.hpp"
#include "tests/runtime/engine/expect_error.hpp"
#include "tests/runtime/engine/golden.hpp"

using namespace troupe;
using namespace troupe::testing;

namespace {

constexpr double kTolerance = 1e-4;  // the engine's own (model_runner_test.cpp)

double worst_error(const std::vector<float>& a, const std::vector<float>& b, int64_t vocab) {
  double worst = 0;
  for (size_t r = 0; r < a.size() / static_cast<size_t>(vocab); ++r)
    worst = std::max(worst, row_error(a.data() + r * vocab, b.data() + r * vocab, vocab));
  return worst;
}

}  // namespace

BOOST_DATA_TEST_CASE(two_ranks_match_the_reference, boost::unit_test::data::make(kGoldenSets), set) {
  auto ck = golden_checkpoint(set);
  generator gen(*ck, 2);
  const int64_t vocab = ck->config.vocab_size;
  double worst = 0;
  for (const auto& c : load_golden(set)) {
    auto logits = gen.prompt_logits(c.prompt);
    worst = std::max(worst, check_prompt_logits(logits, c, vocab, kTolerance, set));
    // Decode through the ranks' pools, each step against the reference's recomputation.
    const int64_t max_len = static_cast<int64_t>(c.prompt.size() + c.greedy.size());
    tensor_parallel_runner runner(*ck, static_cast<int32_t>((max_len + 15) / 16), 16, dtype::f32, {}, 2);
    std::vector<int32_t> table(static_cast<size_t>(runner.num_blocks()));
    std::iota(table.begin(), table.end(), 0);
    const auto got = decode_and_check(runner, table, c, vocab, std::string(set) + " tp 2", kTolerance, -1, &worst);
    BOOST_TEST(got == c.greedy, boost::test_tools::per_element());
  }
  BOOST_TEST_MESSAGE(set << " over 2 ranks: worst relative logits error " << worst << " (tolerance " << kTolerance << ")");
}

// The ranks' sums are added in another order than one rank's dot products: float32 rounding apart,
// nothing else (a wrong head, column or vocabulary range would be far off).
BOOST_DATA_TEST_CASE(two_ranks_equal_one_up_to_rounding, boost::unit_test::data::make(kGoldenSets), set) {
  auto ck = golden_checkpoint(set);
  const auto prompt = load_golden(set).back().prompt;
  const auto one = generator(*ck).prompt_logits(prompt);
  const auto two = generator(*ck, 2).prompt_logits(prompt);
  BOOST_REQUIRE_EQUAL(one.size(), two.size());
  const double err = worst_error(two, one, ck->config.vocab_size);
  BOOST_TEST(err <= 1e-5, set << ": tp 2 against tp 1, relative error " << err);
}

BOOST_DATA_TEST_CASE(batch_and_chunking_invariance_bitwise, boost::unit_test::data::make(kGoldenSets), set) {
  auto ck = golden_checkpoint(set);
  const auto cases = load_golden(set);
  tensor_parallel_runner runner(*ck, batch_invariance_blocks(cases), 16, dtype::f32, {}, 2);
  check_batch_invariance_on(runner, runner.num_blocks(), cases, std::string(set) + " over 2 ranks");
  generator gen(*ck, 2);
  const auto whole = gen.prompt_logits(cases.back().prompt);
  for (int32_t chunk : {1, 7}) {
    const auto chunked = gen.prompt_logits(cases.back().prompt, chunk);
    BOOST_REQUIRE_EQUAL(chunked.size(), whole.size());
    BOOST_TEST(std::memcmp(chunked.data(), whole.data(), whole.size() * sizeof(float)) == 0,
               set << ": chunk " << chunk << " changes the logits over 2 ranks");
  }
}

// Four ranks over 2 KV heads: each KV head replicated on two ranks (shard.hpp). The reference's
// logits and greedy ids through the ranks' pools, bit-for-bit batch invariance, for the dense and
// MoE models (experts sliced and whole) and with a LoRA adapter (k_proj / v_proj pairs replicated).
BOOST_DATA_TEST_CASE(four_ranks_replicate_the_kv_heads,
                     boost::unit_test::data::make({"tiny-dense", "tiny-moe", "tiny-dense-lora"}), set) {
  auto ck = golden_checkpoint(set);
  const auto cases = load_golden(set);
  const int64_t vocab = ck->config.vocab_size;
  std::shared_ptr<const lora_adapter> a;
  if (std::string(set) == "tiny-dense-lora")
    a = std::make_shared<const lora_adapter>(load_lora_adapter(golden_dir(set) + "/adapter", ck->config));
  std::vector<parallel_config> layouts{{4, false}};
  if (std::string(set) == "tiny-moe") layouts.push_back({4, true});
  for (const parallel_config& p : layouts) {
    const std::string what = std::string(set) + " over 4 ranks" + (p.expert_parallel ? " ep" : "");
    generator gen(*ck, p);
    double worst = 0;
    for (const auto& c : cases) {
      worst = std::max(worst, check_prompt_logits(gen.prompt_logits(c.prompt, 0, dtype::f32, {kernels::compute_dtype::f32}, a),
                                                  c, vocab, kTolerance, what));
      tensor_parallel_runner runner(*ck, 32, 16, dtype::f32, {}, p);
      BOOST_TEST(runner.kv_replicas() == 2);
      const int32_t slot = a ? runner.add_adapter(a) : -1;
      std::vector<int32_t> table(32);
      std::iota(table.begin(), table.end(), 0);
      BOOST_TEST(decode_and_check(runner, table, c, vocab, what, kTolerance, slot) == c.greedy, boost::test_tools::per_element());
    }
    BOOST_TEST_MESSAGE(what << ": worst relative logits error " << worst);
    if (!a) {
      tensor_parallel_runner runner(*ck, batch_invariance_blocks(cases), 16, dtype::f32, {}, p);
      check_batch_invariance_on(runner, runner.num_blocks(), cases, what);
    }
  }
}

// Greedy and seeded generation over 2 ranks, the prompt in chunks: the reference's ids, and a
// seed gives the same ids each time.
BOOST_AUTO_TEST_CASE(generator_over_two_ranks) {
  auto ck = golden_checkpoint("tiny-moe");
  generator gen(*ck, 2);
  for (const auto& c : load_golden("tiny-moe")) {
    generate_options o;
    o.max_tokens = static_cast<int32_t>(c.greedy.size());
    o.sampling.temperature = 0.0f;
    o.prefill_chunk = 5;
    BOOST_TEST(gen.generate(c.prompt, o).ids == c.greedy, boost::test_tools::per_element());
    o.sampling.temperature = 0.8f;
    o.sampling.seed = 11;
    o.sampling.has_seed = true;
    BOOST_TEST(gen.generate(c.prompt, o).ids == gen.generate(c.prompt, o).ids, boost::test_tools::per_element());
  }
}

// Quantized weights: the split keeps whole scale groups, the kernels add nothing of their own
// (INT8 and FP8 over 2 ranks equal 1 rank up to rounding), and a split that would cut a group is
// refused naming the tensor.
BOOST_AUTO_TEST_CASE(quantized_weights_split_on_group_boundaries) {
  const auto prompt = load_golden("tiny-dense").back().prompt;
  struct variant {
    quant::method m;
    int32_t group;
  };
  // INT8 per output channel (group 0), FP8 in 16 x 16 blocks.
  for (variant v : {variant{quant::method::int8, 0}, variant{quant::method::fp8, 16}}) {
    quant::load_options o;
    o.quantization = v.m;
    o.group_size = v.group;
    o.block_rows = o.block_cols = v.group;
    auto ck = quant::load_model(golden_dir("tiny-dense"), o);
    BOOST_REQUIRE(ck->weights.layers[0].down_proj.scales != nullptr);
    const auto one = generator(*ck).prompt_logits(prompt);
    const auto two = generator(*ck, 2).prompt_logits(prompt);
    const double err = worst_error(two, one, ck->config.vocab_size);
    BOOST_TEST(err <= 1e-5, "quantized tp 2 against tp 1: relative error " << err);
  }
  quant::load_options o;
  o.quantization = quant::method::fp8;  // 128 x 128 blocks: a rank's 64 query rows cut one
  auto ck = quant::load_model(golden_dir("tiny-dense"), o);
  expect_error([&] { tensor_parallel_runner r(*ck, 4, 16, dtype::f32, {}, 2); }, errc::unsupported,
               "model.layers.0.self_attn.q_proj.weight: a slice of 64 rows at row 0 cuts its scale blocks of 128 rows");
  o.quantization = quant::method::int8;  // groups of 32 columns: down_proj's 160 split at 80 cuts one
  o.group_size = 32;
  ck = quant::load_model(golden_dir("tiny-dense"), o);
  expect_error([&] { tensor_parallel_runner r(*ck, 4, 16, dtype::f32, {}, 2); }, errc::unsupported,
               "model.layers.0.mlp.down_proj.weight: a slice of 80 columns at column 0 cuts its scale groups of 32 columns");
}

BOOST_AUTO_TEST_CASE(sizes_that_do_not_divide_the_model_are_refused) {
  auto ck = golden_checkpoint("tiny-dense");  // 4 query heads, 2 KV heads, intermediate 160
  expect_error([&] { tensor_parallel_runner r(*ck, 4, 16, dtype::f32, {}, 3); }, errc::unsupported,
               "tensor_parallel_size 3: num_attention_heads (4) is not a multiple of it");
  BOOST_TEST(tensor_parallel_runner(*ck, 4, 16, dtype::f32, {}, 4).kv_replicas() == 2);  // more ranks than KV heads: replicas
  expect_error([&] { tensor_parallel_runner r(*ck, 4, 16, dtype::f32, {}, 8); }, errc::unsupported,
               "tensor_parallel_size 8: num_attention_heads (4) is not a multiple of it");
  expect_error([&] { tensor_parallel_runner r(*ck, 4, 16, dtype::f32, {}, 0); }, errc::invalid_argument,
               "tensor_parallel_size must be >= 1 (got 0)");
  tensor_parallel_runner two(*ck, 4, 16, dtype::f32, {}, 2);
  expect_error([&] { two.add_adapter(nullptr); }, errc::invalid_argument, "was not loaded for this model's 2 layers");
  BOOST_TEST(two.num_adapters() == 0);
}

// --threads: the step's threads in all, each rank its share; the logits do not depend on it (bit
// for bit), and a step leaves its caller's own OpenMP setting as it was.
BOOST_AUTO_TEST_CASE(threads_split_among_ranks_and_change_no_logit) {
  auto ck = golden_checkpoint("tiny-dense");
  const auto c = load_golden("tiny-dense").front();
  std::vector<int32_t> table{0, 1, 2, 3};
  auto logits = [&](parallel_config p) {
    tensor_parallel_runner r(*ck, 4, 16, dtype::f32, {}, p);
    const step_sequence seq{0, c.prompt, 0, table, logits_mode::all};
    step_result out;
    const int32_t before = omp_threads_now();
    r.step(std::span(&seq, 1), out);
    BOOST_TEST(omp_threads_now() == before);
    return std::pair(r.threads_per_rank(), out.logits);
  };
  const auto [all_cores, reference] = logits({1});
  BOOST_TEST(all_cores == omp_threads_now());
  const auto [one, one_thread] = logits({1, false, 1});
  BOOST_TEST(one == 1);
  BOOST_TEST((one_thread == reference), "one thread changed the logits");
  const auto [per_rank, two_ranks] = logits({2, false, 5});
  BOOST_TEST(per_rank == 2);  // 5 threads over 2 ranks: 2 each
  const auto [per_rank_default, two_ranks_default] = logits({2});
  BOOST_TEST(per_rank_default == std::max(1, omp_threads_now() / 2));
  BOOST_TEST((two_ranks == two_ranks_default), "threads per rank changed the logits");
  expect_error([&] { tensor_parallel_runner r(*ck, 4, 16, dtype::f32, {}, {2, false, 1}); }, errc::invalid_argument,
               "threads (1) is fewer than tensor_parallel_size (2); each shard needs a thread of its own");
  expect_error([&] { tensor_parallel_runner r(*ck, 4, 16, dtype::f32, {}, {1, false, -1}); }, errc::invalid_argument,
               "threads must be >= 0 (got -1");
}

// LoRA over two ranks (each its share of every pair, lora_shard.hpp) against PEFT's float64 run:
// logits within the engine's tolerance, PEFT's greedy ids through the KV cache and through the
// generator; for the MoE set with sliced and with whole experts.
BOOST_DATA_TEST_CASE(lora_over_two_ranks_matches_peft,
                     boost::unit_test::data::make({"tiny-dense-lora", "tiny-dense-lora-rs", "tiny-moe-lora"}), set) {
  auto ck = golden_checkpoint(set);
  auto a = std::make_shared<const lora_adapter>(load_lora_adapter(golden_dir(set) + "/adapter", ck->config));
  const int64_t vocab = ck->config.vocab_size;
  std::vector<parallel_config> layouts{{2, false}};
  if (std::string(set) == "tiny-moe-lora") layouts.push_back({2, true});
  for (const parallel_config& p : layouts) {
    const std::string what = std::string(set) + (p.expert_parallel ? " ep" : " tp");
    generator gen(*ck, p);
    double worst = 0;
    for (const auto& c : load_golden(set)) {
      const auto logits = gen.prompt_logits(c.prompt, 7, dtype::f32, {kernels::compute_dtype::f32}, a);
      worst = std::max(worst, check_prompt_logits(logits, c, vocab, kTolerance, what));
      tensor_parallel_runner runner(*ck, 32, 16, dtype::f32, {}, p);
      BOOST_TEST(runner.add_adapter(a) == 0);
      std::vector<int32_t> table(32);
      std::iota(table.begin(), table.end(), 0);
      BOOST_TEST(decode_and_check(runner, table, c, vocab, what, kTolerance, 0) == c.greedy, boost::test_tools::per_element());
      generate_options o;
      o.max_tokens = static_cast<int32_t>(c.greedy.size());
      o.sampling.temperature = 0.0f;
      o.adapter = a;
      BOOST_TEST(gen.generate(c.prompt, o).ids == c.greedy, boost::test_tools::per_element());
    }
    BOOST_TEST_MESSAGE(what << ": worst relative logits error " << worst);
  }
}

// Two adapters and the base model in one step over two ranks: each sequence's logits equal its
// prompt's run alone with its adapter, bit for bit, whole, last rows and chunked (lora_test's check
// on the group); an unknown slot is refused before any rank runs, and the group runs on.
BOOST_AUTO_TEST_CASE(lora_mixed_adapters_over_two_ranks_are_bitwise_invariant) {
  auto ck = golden_checkpoint("tiny-dense");
  tensor_parallel_runner runner(*ck, 64, 16, dtype::f32, {}, 2);
  for (const char* set : {"tiny-dense-lora", "tiny-dense-lora-rs"})
    runner.add_adapter(std::make_shared<const lora_adapter>(load_lora_adapter(golden_dir(set) + "/adapter", ck->config)));
  BOOST_TEST_REQUIRE(runner.num_adapters() == 2);
  const auto cases = load_golden("tiny-dense-lora");
  check_mixed_adapter_invariance_on(runner, runner.num_blocks(), ck->config.vocab_size, cases, {-1, 0, 1}, "two ranks");
  std::vector<int32_t> table{0, 1, 2};
  step_sequence bad{5, cases[0].prompt, 0, table, logits_mode::last, 2};
  step_result r;
  expect_error([&] { runner.step(std::span<const step_sequence>(&bad, 1), r); }, errc::out_of_range,
               "sequence 5 asks for LoRA adapter slot 2");
  bad.adapter = 1;
  runner.step(std::span<const step_sequence>(&bad, 1), r);  // the group runs on
  BOOST_TEST(r.num_rows[0] == 1);
  // Set into a slot while serving (each rank its share), the adapter gives what it gave in slot 1;
  // emptied, its slot is refused.
  const auto logits = r.logits;
  runner.set_adapter(3, std::make_shared<const lora_adapter>(
                            load_lora_adapter(golden_dir("tiny-dense-lora-rs") + "/adapter", ck->config)));
  bad.adapter = 3;
  runner.step(std::span<const step_sequence>(&bad, 1), r);
  BOOST_TEST(r.logits == logits);
  runner.set_adapter(3, nullptr);
  expect_error([&] { runner.step(std::span<const step_sequence>(&bad, 1), r); }, errc::out_of_range, "which is empty");
}

// Each rank's pool holds its KV heads; a bad batch is refused before any rank runs, with
// model_runner's message, and the group runs on afterwards.
BOOST_AUTO_TEST_CASE(pools_hold_their_heads_and_bad_batches_leave_the_group_usable) {
  auto ck = golden_checkpoint("tiny-dense");
  tensor_parallel_runner runner(*ck, 4, 16, dtype::f32, {}, 2);
  BOOST_TEST(runner.tp_size() == 2);
  BOOST_TEST(runner.kv(0).layer(0).n_kv_heads == 1);
  BOOST_TEST(runner.kv(1).layer(0).n_kv_heads == 1);
  kv_cache whole(ck->config, 4);
  BOOST_TEST(runner.kv_bytes() == whole.bytes());
  std::vector<int32_t> table{0, 1}, bad_id{1, 4096}, ok{1, 2, 3};
  step_result r;
  step_sequence bad{1, bad_id, 0, table};
  expect_error([&] { runner.step(std::span<const step_sequence>(&bad, 1), r); }, errc::out_of_range,
               "token id 4096 is outside the vocabulary");
  step_sequence good{1, ok, 0, table};
  runner.step(std::span<const step_sequence>(&good, 1), r);
  BOOST_TEST(r.vocab_size == ck->config.vocab_size);
  BOOST_TEST(r.logits.size() == static_cast<size_t>(ck->config.vocab_size));
}
