// Penalties change exactly the logits vLLM's definitions say, once per distinct token, and
// leave the per-thread table clean (also after a rejected id).
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "runtime/core/error.hpp"
#include "runtime/sampling/penalties.hpp"
#include "runtime/sampling/sampler.hpp"

using troupe::sampling_detail::apply_penalties;

BOOST_AUTO_TEST_SUITE(penalties)

BOOST_AUTO_TEST_CASE(repetition_divides_positive_and_multiplies_the_rest) {
  std::vector<float> l = {2.0f, -1.0f, 0.5f, 3.0f, -0.5f, 0.0f, 1.0f};
  const std::vector<int32_t> prompt = {0, 1, 0};
  const std::vector<int32_t> output = {2, 2, 5};
  apply_penalties(l, prompt, output, 2.0f, 0.0f, 0.0f);
  // 0, 2 (> 0): divided; 1 (< 0), 5 (== 0): multiplied; 3, 4, 6 unseen: untouched. Token 0 is
  // in the prompt twice and token 2 in the output twice: each penalised once.
  BOOST_TEST(l == (std::vector<float>{1.0f, -2.0f, 0.25f, 3.0f, -0.5f, 0.0f, 1.0f}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(frequency_and_presence_count_output_only) {
  std::vector<float> l = {4.0f, 4.0f, 4.0f, 4.0f, 4.0f};
  const std::vector<int32_t> prompt = {0, 2};
  const std::vector<int32_t> output = {1, 1, 1, 4, 2};
  apply_penalties(l, prompt, output, 1.0f, 0.25f, 0.5f);
  // id 1: 4 - 0.5*3 - 0.25; id 4 and 2: 4 - 0.5 - 0.25; id 0 (prompt only), 3: untouched.
  BOOST_TEST(l == (std::vector<float>{4.0f, 2.25f, 3.25f, 4.0f, 3.25f}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(negative_penalties_raise_logits) {
  std::vector<float> l = {1.0f, 1.0f};
  const std::vector<int32_t> output = {0, 0};
  apply_penalties(l, {}, output, 1.0f, -0.5f, -1.0f);
  BOOST_TEST(l == (std::vector<float>{3.5f, 1.0f}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(repetition_comes_before_frequency_and_presence) {
  std::vector<float> l = {3.0f, -3.0f};
  const std::vector<int32_t> output = {0, 0, 1};
  apply_penalties(l, {}, output, 1.5f, 0.25f, 0.5f);
  // 3 / 1.5 = 2, - 0.5*2 = 1, - 0.25 = 0.75 (the other order would give 1.1666...).
  // -3 * 1.5 = -4.5, - 0.5 = -5, - 0.25 = -5.25.
  BOOST_TEST(l == (std::vector<float>{0.75f, -5.25f}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(off_penalties_change_nothing_and_check_nothing) {
  std::vector<float> l = {1.0f, -2.0f, 0.0f};
  const std::vector<int32_t> bad = {7, -3};
  apply_penalties(l, bad, bad, 1.0f, 0.0f, 0.0f);
  BOOST_TEST(l == (std::vector<float>{1.0f, -2.0f, 0.0f}), boost::test_tools::per_element());
  // Only the repetition penalty reads the prompt, so it is not checked without it.
  const std::vector<int32_t> output = {1};
  apply_penalties(l, bad, output, 1.0f, 1.0f, 0.0f);
  BOOST_TEST(l == (std::vector<float>{1.0f, -3.0f, 0.0f}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(state_does_not_leak_between_calls) {
  std::vector<float> a = {1.0f, 1.0f, 1.0f};
  const std::vector<int32_t> out_a = {0, 0, 2};
  apply_penalties(a, {}, out_a, 2.0f, 1.0f, 1.0f);
  BOOST_TEST(a == (std::vector<float>{-2.5f, 1.0f, -1.5f}), boost::test_tools::per_element());
  std::vector<float> b = {1.0f, 1.0f, 1.0f};
  const std::vector<int32_t> out_b = {1};
  apply_penalties(b, {}, out_b, 2.0f, 1.0f, 1.0f);
  BOOST_TEST(b == (std::vector<float>{1.0f, -1.5f, 1.0f}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(out_of_range_ids_are_rejected_by_position) {
  std::vector<float> l = {1.0f, 1.0f, 1.0f};
  const std::vector<int32_t> output = {0, 3};
  try {
    apply_penalties(l, {}, output, 1.0f, 0.5f, 0.0f);
    BOOST_ERROR("accepted output id 3 in a vocab of 3");
  } catch (const troupe::error& e) {
    BOOST_TEST((e.code() == troupe::errc::out_of_range));
    BOOST_TEST(std::string(e.what()) ==
               "output[1] = 3 is not a token id of this row (vocab 3)");
  }
  const std::vector<int32_t> prompt = {-1};
  try {
    apply_penalties(l, prompt, {}, 1.2f, 0.0f, 0.0f);
    BOOST_ERROR("accepted prompt id -1");
  } catch (const troupe::error& e) {
    BOOST_TEST((e.code() == troupe::errc::out_of_range));
    BOOST_TEST(std::string(e.what()).find("prompt[0] = -1") != std::string::npos);
  }
  // Nothing was applied, and the table is still clean for the next call.
  BOOST_TEST(l == (std::vector<float>{1.0f, 1.0f, 1.0f}), boost::test_tools::per_element());
  const std::vector<int32_t> good = {2};
  apply_penalties(l, {}, good, 1.0f, 0.5f, 0.0f);
  BOOST_TEST(l == (std::vector<float>{1.0f, 1.0f, 0.5f}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(sampler_applies_them_before_greedy) {
  auto params = troupe::sampling_params{};
  params.temperature = 0.0f;
  params.presence_penalty = 0.25f;
  troupe::sampler s(params);
  std::vector<float> l = {1.0f, 0.9f, -1.0f};
  const std::vector<int32_t> output = {0};
  BOOST_TEST(s.sample(l, {}, output) == 1);
  BOOST_TEST(l == (std::vector<float>{0.75f, 0.9f, -1.0f}), boost::test_tools::per_element());

  auto rep = troupe::sampling_params{};
  rep.temperature = 0.0f;
  rep.repetition_penalty = 2.0f;
  troupe::sampler r(rep);
  std::vector<float> m = {1.0f, 0.9f, -1.0f};
  const std::vector<int32_t> prompt = {0, 2};
  BOOST_TEST(r.sample(m, prompt, {}) == 1);
  BOOST_TEST(m == (std::vector<float>{0.5f, 0.9f, -2.0f}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()
