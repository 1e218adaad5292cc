// logits_mode::hidden: the last token's final hidden state (Hugging Face's last_hidden_state, what
// last-token-pooling embedding models return). Against the float64 references: lm_head applied to
// it (the portable reference matmul) gives the reference's last-position logits within the
// engine's tolerance, on every golden set and over two tensor-parallel ranks; the state does not
// depend on the batch (sequences asking for logits beside it) nor on prompt chunking, bit for bit.
// And the embedding made of it (embedding.hpp, generator::embed).
#define BOOST_TEST_MODULE troupe_hidden_state
#include <boost/test/unit_test.hpp>
#include <boost/test/data/test_case.hpp>

#include <numeric>
#include <random>

#include "kernels/kernels.hpp"
#include "runtime/core/error.hpp"
#include "runtime/engine/embedding.hpp"
#include "runtime/engine/generator.hpp"
#include "runtime/engine/tensor_parallel_runner.hpp"
#include "tests/runtime/engine/golden.hpp"

using namespace troupe;
using namespace troupe::testing;

namespace {

constexpr double kTolerance = 1e-4;  // the engine's own (model_runner_test.cpp)

std::vector<int32_t> identity_table(int32_t blocks, int32_t first = 0) {
  std::vector<int32_t> t(static_cast<size_t>(blocks));
  std::iota(t.begin(), t.end(), first);
  return t;
}

// The prompt's last hidden state, its prompt fed in chunks of `chunk` tokens (0: at once).
std::vector<float> hidden_of(tensor_parallel_runner& r, const std::vector<int32_t>& prompt, size_t chunk = 0) {
  const auto table = identity_table(r.num_blocks());
  if (chunk == 0) chunk = prompt.size();
  step_result out;
  for (size_t start = 0; start < prompt.size(); start += chunk) {
    const size_t n = std::min(chunk, prompt.size() - start);
    const bool last = start + n == prompt.size();
    const step_sequence s{7, std::span(prompt).subspan(start, n), static_cast<int32_t>(start), table,
                          last ? logits_mode::hidden : logits_mode::none};
    r.step(std::span(&s, 1), out);
  }
  BOOST_REQUIRE_EQUAL(out.hidden_row.size(), 1u);
  BOOST_REQUIRE_EQUAL(out.hidden_row[0], 0);
  BOOST_TEST(out.num_rows[0] == 0);
  BOOST_TEST(out.logits.empty());
  const auto h = out.hidden_of(0);
  return {h.begin(), h.end()};
}

int32_t blocks_for(const std::vector<golden_case>& cases) {
  size_t longest = 0;
  for (const auto& c : cases) longest = std::max(longest, c.prompt.size());
  return static_cast<int32_t>((longest + 15) / 16);
}

}  // namespace

BOOST_DATA_TEST_CASE(lm_head_of_the_hidden_state_gives_the_reference_logits, boost::unit_test::data::make(kGoldenSets),
                     set) {
  auto ck = golden_checkpoint(set);
  const auto cases = load_golden(set);
  const int64_t vocab = ck->weights.lm_head.rows, hidden = ck->config.hidden_size;
  for (const int32_t ranks : {1, 2}) {
    tensor_parallel_runner r(*ck, blocks_for(cases), 16, dtype::f32, {}, ranks);
    for (const auto& c : cases) {
      const auto pos = static_cast<int64_t>(c.prompt.size()) - 1;
      const auto it = std::find(c.prompt_logits.index.begin(), c.prompt_logits.index.end(), pos);
      BOOST_REQUIRE(it != c.prompt_logits.index.end());
      const auto h = hidden_of(r, c.prompt);
      BOOST_REQUIRE_EQUAL(h.size(), static_cast<size_t>(hidden));
      std::vector<float> logits(static_cast<size_t>(vocab));
      kernels::matmul_reference(h.data(), 1, ck->weights.lm_head, logits.data());
      const double err = row_error(logits.data(), c.prompt_logits.data.data() + (it - c.prompt_logits.index.begin()) * vocab, vocab);
      BOOST_TEST(err <= kTolerance, set << " " << c.id << " over " << ranks << " rank(s): relative error " << err);
    }
  }
}

BOOST_AUTO_TEST_CASE(the_hidden_state_does_not_depend_on_batch_or_chunking) {
  auto ck = golden_checkpoint("tiny-dense");
  const auto cases = load_golden("tiny-dense");
  const auto& prompt = cases.front().prompt;
  const int32_t per = blocks_for(cases);
  tensor_parallel_runner alone(*ck, per, 16, dtype::f32, {}, 1);
  const auto want = hidden_of(alone, prompt);
  tensor_parallel_runner chunked(*ck, per, 16, dtype::f32, {}, 1);
  BOOST_TEST((hidden_of(chunked, prompt, 5) == want), "chunks of 5 tokens changed the hidden state");

  // Beside sequences that ask for logits (all rows, the last row) and one more hidden state.
  tensor_parallel_runner batch(*ck, 4 * per, 16, dtype::f32, {}, 1);
  std::vector<std::vector<int32_t>> tables;
  for (int32_t s = 0; s < 4; ++s) tables.push_back(identity_table(per, s * per));
  const auto& other = cases.back().prompt;
  const std::vector<step_sequence> seqs{{0, other, 0, tables[0], logits_mode::all},
                                        {1, prompt, 0, tables[1], logits_mode::hidden},
                                        {2, other, 0, tables[2], logits_mode::last},
                                        {3, other, 0, tables[3], logits_mode::hidden}};
  step_result out;
  batch.step(seqs, out);
  BOOST_REQUIRE_EQUAL(out.hidden_row.size(), 4u);
  BOOST_TEST(out.hidden_row[0] == -1);
  BOOST_TEST(out.hidden_row[2] == -1);
  const auto h = out.hidden_of(1);
  BOOST_TEST((std::vector<float>(h.begin(), h.end()) == want), "the batch changed the hidden state");
  // The logits rows beside them are where first_row says, and the same as alone.
  BOOST_TEST(out.num_rows[0] == static_cast<int64_t>(other.size()));
  BOOST_TEST(out.num_rows[1] == 0);
  BOOST_TEST(out.num_rows[2] == 1);
  BOOST_TEST(out.num_rows[3] == 0);
  tensor_parallel_runner ref(*ck, per, 16, dtype::f32, {}, 1);
  const auto table = identity_table(per);
  const step_sequence last_only{2, other, 0, table, logits_mode::last};
  step_result want_last;
  ref.step(std::span(&last_only, 1), want_last);
  const auto got = out.row(2), exp = want_last.row(0);
  BOOST_TEST((std::vector<float>(got.begin(), got.end()) == std::vector<float>(exp.begin(), exp.end())),
             "a hidden-state sequence changed another's logits");
  // And the hidden state of `other` is that row's input: lm_head of it is the last row's logits.
  std::vector<float> from_hidden(static_cast<size_t>(out.vocab_size));
  kernels::matmul(out.hidden_of(3).data(), 1, ck->weights.lm_head, from_hidden.data());
  BOOST_TEST((from_hidden == std::vector<float>(exp.begin(), exp.end())));
}

// finish_embedding: a prefix of `dimensions` values, then unit L2 length; a zero state stays zero
// (torch's normalize floor); bad dimensions are errors naming the sizes.
BOOST_AUTO_TEST_CASE(finish_embedding_cuts_then_normalizes) {
  const std::vector<float> pooled{3, 4, 12, 0};
  const auto all = finish_embedding(pooled, {});
  BOOST_TEST(all.size() == 4u);
  BOOST_TEST(all[0] == 3.0f / 13, boost::test_tools::tolerance(1e-6f));
  BOOST_TEST(all[2] == 12.0f / 13, boost::test_tools::tolerance(1e-6f));
  const auto two = finish_embedding(pooled, {true, 2});
  BOOST_TEST(two.size() == 2u);
  BOOST_TEST(two[0] == 0.6f, boost::test_tools::tolerance(1e-6f));
  BOOST_TEST(two[1] == 0.8f, boost::test_tools::tolerance(1e-6f));
  BOOST_TEST((finish_embedding(pooled, {false, 3}) == std::vector<float>{3, 4, 12}));
  BOOST_TEST((finish_embedding(std::vector<float>(3, 0.0f), {}) == std::vector<float>(3, 0.0f)));
  BOOST_CHECK_EXCEPTION(finish_embedding(pooled, {true, 5}), troupe::error, [](const troupe::error& e) {
    return std::string(e.what()).find("dimensions (5) exceeds the model's hidden_size (4)") != std::string::npos;
  });
  BOOST_CHECK_THROW(finish_embedding(pooled, {true, -1}), troupe::error);
}

// generator::embed: the hidden state the step returns, normalized; the same for any prefill
// chunking and over two ranks (within float32 rounding there: the row-parallel sums differ).
BOOST_AUTO_TEST_CASE(generator_embeds_the_last_hidden_state) {
  auto ck = golden_checkpoint("tiny-dense");
  const auto prompt = load_golden("tiny-dense").front().prompt;
  tensor_parallel_runner r(*ck, static_cast<int32_t>((prompt.size() + 15) / 16), 16, dtype::f32, {}, 1);
  const auto h = hidden_of(r, prompt);
  generator gen(*ck);
  BOOST_TEST((gen.embed(prompt, {false, 0}) == h));
  const auto e = gen.embed(prompt, {});
  BOOST_TEST((e == finish_embedding(h, {})));
  double norm = 0;
  for (float v : e) norm += double(v) * v;
  BOOST_TEST(norm == 1.0, boost::test_tools::tolerance(1e-6));
  generate_options chunked;
  chunked.prefill_chunk = 3;
  BOOST_TEST((gen.embed(prompt, {}, chunked) == e));
  const auto split = generator(*ck, 2).embed(prompt, {});
  BOOST_REQUIRE_EQUAL(split.size(), e.size());
  for (size_t i = 0; i < e.size(); ++i) BOOST_TEST(std::abs(split[i] - e[i]) <= 1e-5f, "value " << i);
  BOOST_CHECK_THROW(gen.embed({}, {}), troupe::error);
  BOOST_CHECK_THROW(gen.embed(prompt, {true, 65}), troupe::error);
}

// embed_batch: prompts share steps up to the token budget and a longer one runs alone in chunks;
// every embedding is bit for bit the prompt's alone. A bad input is named before any step.
BOOST_AUTO_TEST_CASE(batched_embeddings_equal_each_alone) {
  auto ck = golden_checkpoint("tiny-dense");
  std::vector<std::vector<int32_t>> prompts;
  for (const auto& c : load_golden("tiny-dense")) prompts.push_back(c.prompt);
  prompts.push_back({5});
  prompts.push_back({7, 8, 9});
  std::mt19937 rng(3);
  prompts.push_back(std::vector<int32_t>(45));  // longer than the budget below: chunked alone
  for (auto& t : prompts.back()) t = static_cast<int32_t>(rng() % 4096);
  generator gen(*ck);
  std::vector<std::vector<float>> alone;
  for (const auto& p : prompts) alone.push_back(gen.embed(p, {}));
  generate_options small;
  small.prefill_chunk = 20;  // tokens a step: groups of short prompts, the 45-token one in 3 chunks
  const auto batched = gen.embed_batch(prompts, {}, small);
  BOOST_REQUIRE_EQUAL(batched.size(), prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) BOOST_TEST((batched[i] == alone[i]), "prompt " << i);
  BOOST_TEST((gen.embed_batch(prompts, {})[2] == alone[2]));  // the default budget: one step for all
  BOOST_CHECK_EXCEPTION(gen.embed_batch({{1, 2}, {}}, {}), troupe::error, [](const troupe::error& e) {
    return std::string(e.what()).find("input 1: the prompt has no tokens") != std::string::npos;
  });
  BOOST_CHECK_THROW(gen.embed_batch({}, {}), troupe::error);
}
