// Prompt-lookup drafts: the longest repeated suffix wins, the most recent occurrence is copied, a
// loop continues past the end, and nothing is proposed without a match or with drafting off.
#include <boost/test/unit_test.hpp>

#include <random>

#include "runtime/sched/ngram_proposer.hpp"

using namespace troupe::sched;
using v = std::vector<int32_t>;

namespace {
v drafts(const v& tokens, int32_t k, int32_t min_n = 2, int32_t max_n = 4, int32_t max_drafts = 100) {
  return propose_ngram_drafts(tokens, ngram_options{k, min_n, max_n}, max_drafts);
}
// The rule written the slow way: for n from max_n down, the most recent earlier start of the
// n-token suffix; copy what follows it, continued periodically.
v brute_force(const v& t, int32_t k, int32_t min_n, int32_t max_n, int32_t max_drafts) {
  const auto len = static_cast<int64_t>(t.size());
  const int64_t want = std::min(k, max_drafts);
  if (want <= 0) return {};
  for (int64_t n = std::min<int64_t>(max_n, len - 1); n >= std::max(min_n, 1); --n)
    for (int64_t start = len - n - 1; start >= 0; --start) {
      if (!std::equal(t.end() - n, t.end(), t.begin() + start)) continue;
      v d;
      for (int64_t i = start + n; static_cast<int64_t>(d.size()) < want; ++i)
        d.push_back(i < len ? t[static_cast<size_t>(i)] : d[static_cast<size_t>(i - len)]);
      return d;
    }
  return {};
}
}  // namespace

BOOST_AUTO_TEST_SUITE(ngram_proposer)

BOOST_AUTO_TEST_CASE(equals_the_rule_written_the_slow_way) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 3000; ++trial) {
    v t(1 + rng() % 40);
    const auto alphabet = 2 + rng() % 6;  // few symbols: many matches of every length
    for (auto& x : t) x = static_cast<int32_t>(rng() % alphabet);
    const int32_t min_n = 1 + static_cast<int32_t>(rng() % 3), max_n = min_n + static_cast<int32_t>(rng() % 4);
    const int32_t k = static_cast<int32_t>(rng() % 6), cap = static_cast<int32_t>(rng() % 8);
    BOOST_TEST(drafts(t, k, min_n, max_n, cap) == brute_force(t, k, min_n, max_n, cap), boost::test_tools::per_element());
  }
}

BOOST_AUTO_TEST_CASE(copies_what_followed_the_suffix) {
  // "... 7 8 9 10 11 ... 7 8" -> 9 10 11
  BOOST_TEST(drafts({1, 7, 8, 9, 10, 11, 2, 3, 7, 8}, 3) == (v{9, 10, 11}), boost::test_tools::per_element());
  BOOST_TEST(drafts({1, 7, 8, 9, 10, 11, 2, 3, 7, 8}, 2) == (v{9, 10}), boost::test_tools::per_element());
  BOOST_TEST(drafts({1, 7, 8, 9, 10, 11, 2, 3, 7, 8}, 5, 2, 4, 1) == (v{9}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(the_longest_suffix_wins_over_a_more_recent_shorter_one) {
  // Suffix "5 7 8" occurs at the start (then 1); "7 8" alone occurs more recently (then 2).
  BOOST_TEST(drafts({5, 7, 8, 1, 9, 7, 8, 2, 5, 7, 8}, 1) == (v{1}), boost::test_tools::per_element());
  BOOST_TEST(drafts({5, 7, 8, 1, 9, 7, 8, 2, 5, 7, 8}, 1, 2, 2) == (v{2}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(the_most_recent_occurrence_is_copied) {
  BOOST_TEST(drafts({7, 8, 1, 7, 8, 2, 7, 8}, 1) == (v{2}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_loop_continues_past_the_end) {
  BOOST_TEST(drafts({4, 5, 5, 5, 5}, 4) == (v{5, 5, 5, 5}), boost::test_tools::per_element());
  BOOST_TEST(drafts({9, 1, 2, 3, 1, 2, 3, 1, 2}, 5) == (v{3, 1, 2, 3, 1}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(nothing_without_a_match_or_with_drafting_off) {
  BOOST_TEST(drafts({1, 2, 3, 4, 5}, 4).empty());
  BOOST_TEST(drafts({1, 2, 1, 2}, 0).empty());
  BOOST_TEST(drafts({1, 2, 1, 2}, 4, 2, 4, 0).empty());
  BOOST_TEST(drafts({}, 4).empty());
  BOOST_TEST(drafts({3}, 4, 1, 4).empty());
  // min_n = 2: a lone repeated token is no match; min_n = 1 takes it.
  BOOST_TEST(drafts({6, 1, 2, 6}, 2).empty());
  BOOST_TEST(drafts({6, 1, 2, 6}, 2, 1, 4) == (v{1, 2}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()
