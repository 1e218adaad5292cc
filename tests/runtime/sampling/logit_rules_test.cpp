// allowed_token_ids, min_tokens and logit_bias through sampler::sample: which ids can come, on
// the greedy path and when sampling (every path), their order (vLLM's: allowed ids, min_tokens,
// bias), and the refusals.
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "runtime/core/error.hpp"
#include "tests/runtime/sampling/test_util.hpp"

using namespace troupe::test;
using troupe::sampler;
using troupe::sampling_params;

namespace {

// A 4096-entry row with distinct values; id 7 is the argmax, then 11, 3, ...
std::vector<float> ranked_row() {
  std::vector<float> row(4096);
  for (size_t i = 0; i < row.size(); ++i) row[i] = -static_cast<float>((i * 37) % 4096) / 256.0f;
  row[7] = 5.0f;
  row[11] = 4.0f;
  row[3] = 3.0f;
  return row;
}

int32_t greedy(sampling_params p, std::vector<float> row, std::vector<int32_t> output = {}) {
  p.temperature = 0;
  sampler s(p);
  return s.sample(row, {}, output);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(logit_rules)

BOOST_AUTO_TEST_CASE(allowed_token_ids_are_the_only_ones_drawn) {
  auto p = seeded(3);
  BOOST_TEST(greedy(p, ranked_row()) == 7);
  p.allowed_token_ids = {3, 11, 3};  // a repeated id is harmless
  BOOST_TEST(greedy(p, ranked_row()) == 11);
  // Sampling at temperature 1 (dense path) and with top-k (candidate path): only allowed ids.
  for (int32_t top_k : {0, 50}) {
    auto q = p;
    q.top_k = top_k;
    sampler s(q);
    const auto got = keys(draw_counts(s, ranked_row(), 3000));
    BOOST_TEST((got == std::set<int32_t>{3, 11}), "top_k " << top_k);
  }
}

BOOST_AUTO_TEST_CASE(min_tokens_holds_the_stop_ids_back_until_then) {
  auto p = seeded(1);
  p.min_tokens = 2;
  p.min_tokens_stop_ids = {7, 11};
  const std::vector<float> row = ranked_row();
  BOOST_TEST(greedy(p, row, {}) == 3);
  BOOST_TEST(greedy(p, row, {5}) == 3);
  BOOST_TEST(greedy(p, row, {5, 6}) == 7);  // two output tokens: stops allowed again
  // Sampling never draws them before min_tokens.
  sampler s(p);
  const auto got = draw_counts(s, row_from_probs(64, {{7, 0.6}, {11, 0.3}, {2, 0.1}}), 2000);
  BOOST_TEST((keys(got) == std::set<int32_t>{2}));
}

BOOST_AUTO_TEST_CASE(logit_bias_moves_the_choice) {
  auto p = seeded(2);
  p.logit_bias = {{7, -100.0f}};
  BOOST_TEST(greedy(p, ranked_row()) == 11);
  p.logit_bias = {{4000, 100.0f}};
  BOOST_TEST(greedy(p, ranked_row()) == 4000);
  // Sampling: a +100 bias makes a token all but certain; -100 all but impossible.
  p.logit_bias = {{5, 100.0f}};
  sampler s(p);
  BOOST_TEST((keys(draw_counts(s, ranked_row(), 500)) == std::set<int32_t>{5}));
}

// A bad word's last token is banned where the output ends with the rest of it.
BOOST_AUTO_TEST_CASE(bad_words_ban_the_token_that_would_complete_them) {
  auto p = seeded(5);
  p.bad_words_ids = {{7}, {20, 21, 11}};
  BOOST_TEST(greedy(p, ranked_row()) == 11);         // 7 banned always
  BOOST_TEST(greedy(p, ranked_row(), {20}) == 11);   // "20 21" not yet there
  BOOST_TEST(greedy(p, ranked_row(), {20, 21}) == 3);  // 11 would complete "20 21 11"
  BOOST_TEST(greedy(p, ranked_row(), {21, 20, 21}) == 3);
  BOOST_TEST(greedy(p, ranked_row(), {20, 21, 5}) == 11);
  // Sampling never completes one either.
  p.bad_words_ids = {{9, 2}};
  sampler s(p);
  std::vector<int32_t> out = {4, 9};
  const auto row = row_from_probs(64, {{2, 0.9}, {5, 0.1}});
  for (int i = 0; i < 500; ++i) {
    auto work = row;
    BOOST_REQUIRE(s.sample(work, {}, out) == 5);
  }
  p.bad_words_ids = {{}};
  BOOST_CHECK_THROW(sampler{p}, troupe::error);
}

BOOST_AUTO_TEST_CASE(vllm_order_bias_cannot_revive_a_masked_token) {
  auto p = seeded(4);
  p.allowed_token_ids = {3, 11};
  p.logit_bias = {{7, 100.0f}, {3, 2.0f}};  // 7 is not allowed; 3 (3.0 + 2) passes 11 (4.0)
  BOOST_TEST(greedy(p, ranked_row()) == 3);
  p.min_tokens = 1;
  p.min_tokens_stop_ids = {3};
  p.logit_bias = {{3, 100.0f}};
  BOOST_TEST(greedy(p, ranked_row()) == 11);
}

BOOST_AUTO_TEST_CASE(refusals_name_the_field) {
  auto expect_refused = [](sampling_params p, const std::string& what) {
    try {
      sampler s(p);
      BOOST_ERROR("accepted: " << what);
    } catch (const troupe::error& e) {
      BOOST_TEST(std::string(e.what()).find(what) != std::string::npos, e.what());
    }
  };
  auto p = seeded(0);
  p.min_tokens = -1;
  expect_refused(p, "min_tokens");
  p = seeded(0);
  p.logit_bias = {{5, 100.5f}};
  expect_refused(p, "logit_bias[5]");
  p.logit_bias = {{5, std::nanf("")}};
  expect_refused(p, "logit_bias[5]");
  p.logit_bias = {{-2, 1.0f}};
  expect_refused(p, "logit_bias[-2]");
  p = seeded(0);
  p.allowed_token_ids = {1, -3};
  expect_refused(p, "allowed_token_ids[1]");
  // An id past the row is found when the row is seen (the sampler does not know the vocab).
  p = seeded(0);
  p.allowed_token_ids = {5000};
  sampler s(p);
  auto row = ranked_row();
  try {
    s.sample(row, {}, {});
    BOOST_ERROR("an id outside the row was accepted");
  } catch (const troupe::error& e) {
    BOOST_TEST((e.code() == troupe::errc::out_of_range));
    BOOST_TEST(std::string(e.what()).find("allowed_token_ids holds token id 5000") != std::string::npos, e.what());
  }
}

BOOST_AUTO_TEST_SUITE_END()
