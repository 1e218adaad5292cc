// Expert parallelism on CPU shards against the float64 golden references: the MoE set over two
// ranks, each holding half of the experts whole, gives logits within the engine's 1e-4 and the
// reference's greedy tokens (decode through the ranks' pools included), equals one rank up to
// rounding and stays independent of the batch and of prompt chunking bit for bit. Whole experts
// free the split from moe_intermediate_size and the quantization groups of the experts' columns,
// and the experts need not divide evenly among the ranks.
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <numeric>

#include "runtime/core/error.hpp"
#include "runtime/engine/generator.hpp"
#include "runtime/engine/tensor_parallel_runner.hpp"
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
const parallel_config kTwoRanksEp{2, true};

double worst_error(const std::vector<float>& a, const std::vector<float>& b, int64_t vocab) {
  double worst = 0;
  for (size_t r = 0; r < a.size() / static_cast<size_t>(vocab); ++r)
    worst = std::max(worst, row_error(a.data() + r * vocab, b.data() + r * vocab, vocab));
  return worst;
}

// The golden MoE model cut down to its first `experts` experts, each `width` wide (rows of
// gate_proj / up_proj, columns of down_proj): a smaller Qwen3-MoE model made of the same weights.
std::unique_ptr<checkpoint> fewer_experts(const checkpoint& full, int64_t experts, int64_t width) {
  auto c = std::make_unique<checkpoint>();
  c->dir = full.dir;
  c->config = full.config;
  c->config.num_experts = experts;
  c->config.num_experts_per_tok = std::min<int64_t>(experts, full.config.num_experts_per_tok);
  c->config.moe_intermediate_size = width;
  c->generation = full.generation;
  c->weights = full.weights;
  for (auto& l : c->weights.layers) {
    l.router = slice_rows(l.router, 0, experts);
    l.experts.resize(static_cast<size_t>(experts));
    for (auto& e : l.experts) {
      e.gate_proj = slice_rows(e.gate_proj, 0, width);
      e.up_proj = slice_rows(e.up_proj, 0, width);
      e.down_proj = copy_columns(e.down_proj, 0, width, c->owned);
    }
  }
  return c;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(expert_parallel)

BOOST_AUTO_TEST_CASE(two_ranks_of_whole_experts_match_the_reference) {
  auto ck = golden_checkpoint("tiny-moe");
  generator gen(*ck, kTwoRanksEp);
  const int64_t vocab = ck->config.vocab_size;
  double worst = 0;
  for (const auto& c : load_golden("tiny-moe")) {
    auto logits = gen.prompt_logits(c.prompt);
    worst = std::max(worst, check_prompt_logits(logits, c, vocab, kTolerance, "tiny-moe ep"));
    const int64_t max_len = static_cast<int64_t>(c.prompt.size() + c.greedy.size());
    tensor_parallel_runner runner(*ck, static_cast<int32_t>((max_len + 15) / 16), 16, dtype::f32, {}, kTwoRanksEp);
    BOOST_TEST(runner.expert_parallel());
    std::vector<int32_t> table(static_cast<size_t>(runner.num_blocks()));
    std::iota(table.begin(), table.end(), 0);
    const auto got = decode_and_check(runner, table, c, vocab, "tiny-moe tp 2 ep", kTolerance, -1, &worst);
    BOOST_TEST(got == c.greedy, boost::test_tools::per_element());
  }
  BOOST_TEST_MESSAGE("tiny-moe over 2 expert-parallel ranks: worst relative logits error " << worst);
}

// One rank's sums in another order, nothing else; and not the sliced experts' order either (the
// flag reaches the ranks).
BOOST_AUTO_TEST_CASE(whole_experts_equal_one_rank_up_to_rounding) {
  auto ck = golden_checkpoint("tiny-moe");
  const auto prompt = load_golden("tiny-moe").back().prompt;
  const auto one = generator(*ck).prompt_logits(prompt);
  const auto ep = generator(*ck, kTwoRanksEp).prompt_logits(prompt);
  const auto tp = generator(*ck, 2).prompt_logits(prompt);
  BOOST_REQUIRE_EQUAL(one.size(), ep.size());
  const double err = worst_error(ep, one, ck->config.vocab_size);
  BOOST_TEST(err <= 1e-5, "tp 2 ep against tp 1: relative error " << err);
  BOOST_TEST(std::memcmp(ep.data(), tp.data(), ep.size() * sizeof(float)) != 0,
             "expert parallel gave the sliced experts' bits: the flag did not reach the ranks");
}

BOOST_AUTO_TEST_CASE(batch_and_chunking_invariance_bitwise) {
  auto ck = golden_checkpoint("tiny-moe");
  const auto cases = load_golden("tiny-moe");
  tensor_parallel_runner runner(*ck, batch_invariance_blocks(cases), 16, dtype::f32, {}, kTwoRanksEp);
  check_batch_invariance_on(runner, runner.num_blocks(), cases, "tiny-moe over 2 expert-parallel ranks");
  generator gen(*ck, kTwoRanksEp);
  const auto whole = gen.prompt_logits(cases.back().prompt);
  for (int32_t chunk : {1, 7}) {
    const auto chunked = gen.prompt_logits(cases.back().prompt, chunk);
    BOOST_REQUIRE_EQUAL(chunked.size(), whole.size());
    BOOST_TEST(std::memcmp(chunked.data(), whole.data(), whole.size() * sizeof(float)) == 0,
               "chunk " << chunk << " changes the logits over 2 expert-parallel ranks");
  }
}

// 3 experts of width 45: tensor parallelism cannot halve 45, expert parallelism gives the ranks 1
// and 2 experts and matches one rank; a single expert cannot go to two ranks.
BOOST_AUTO_TEST_CASE(experts_that_do_not_divide_evenly) {
  auto full = golden_checkpoint("tiny-moe");
  auto ck = fewer_experts(*full, 3, 45);
  const auto prompt = load_golden("tiny-moe").back().prompt;
  expect_error([&] { tensor_parallel_runner r(*ck, 4, 16, dtype::f32, {}, 2); }, errc::unsupported,
               "moe_intermediate_size (45) is not a multiple of it");
  const auto one = generator(*ck).prompt_logits(prompt);
  const auto ep = generator(*ck, kTwoRanksEp).prompt_logits(prompt);
  const double err = worst_error(ep, one, ck->config.vocab_size);
  BOOST_TEST(err <= 1e-5, "3 experts over 2 ranks against 1 rank: relative error " << err);
  auto single = fewer_experts(*full, 1, 48);
  expect_error([&] { tensor_parallel_runner r(*single, 4, 16, dtype::f32, {}, kTwoRanksEp); }, errc::unsupported,
               "num_experts (1) is smaller than the group");
}

// INT8 in groups of 32 columns: halving an expert's 48 columns would cut a group (refused without
// expert parallelism); whole experts keep their groups and match one rank.
BOOST_AUTO_TEST_CASE(quantized_experts_stay_whole) {
  quant::load_options o;
  o.quantization = quant::method::int8;
  o.group_size = 32;
  auto ck = quant::load_model(golden_dir("tiny-moe"), o);
  BOOST_REQUIRE(ck->weights.layers[0].experts[0].down_proj.scales != nullptr);
  expect_error([&] { tensor_parallel_runner r(*ck, 4, 16, dtype::f32, {}, 2); }, errc::unsupported,
               "experts.0.down_proj.weight: a slice of 24 columns at column 0 cuts its scale groups of 32 columns");
  const auto prompt = load_golden("tiny-moe").back().prompt;
  const auto one = generator(*ck).prompt_logits(prompt);
  const auto ep = generator(*ck, kTwoRanksEp).prompt_logits(prompt);
  const double err = worst_error(ep, one, ck->config.vocab_size);
  BOOST_TEST(err <= 1e-5, "INT8 tp 2 ep against tp 1: relative error " << err);
}

BOOST_AUTO_TEST_SUITE_END()
