// Beam search's loop (vLLM's): a width of one is greedy decoding, a wider beam finds the sequence
// greedy misses, stop ids finish beams, and length_penalty / include_stop enter the score as vLLM's
// get_beam_search_score does. The model here is a table of next-token probabilities.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <functional>
#include <map>

#include "runtime/serve/beam_search.hpp"

using namespace troupe::serve;

namespace {

using next_fn = std::function<std::vector<std::pair<int32_t, double>>(const std::vector<int32_t>&)>;

// Runs the loop with `model` giving each beam's candidates (probabilities, most likely first).
std::vector<beam> run(beam_search& s, const next_fn& model) {
  while (!s.done()) {
    std::vector<std::vector<std::pair<int32_t, double>>> next;
    for (const auto& b : s.live()) {
      auto c = model(b.tokens);
      for (auto& [id, p] : c) p = std::log(p);
      c.resize(std::min(c.size(), static_cast<size_t>(s.candidates_per_beam())));
      next.push_back(c);
    }
    s.advance(next);
  }
  return s.best();
}

// After A the model hesitates (X or Y, 0.3 each); after B it is sure of Z: greedy takes A,
// a beam of two finds B Z (0.4 * 0.9 = 0.36 against 0.6 * 0.3 = 0.18).
std::vector<std::pair<int32_t, double>> hesitant(const std::vector<int32_t>& t) {
  constexpr int32_t A = 1, B = 2, X = 3, Y = 4, Z = 5;
  if (t.empty()) return {{A, 0.6}, {B, 0.4}};
  if (t.back() == A) return {{X, 0.3}, {Y, 0.3}, {Z, 0.2}, {B, 0.2}};
  if (t.back() == B) return {{Z, 0.9}, {X, 0.1}};
  return {{A, 0.5}, {B, 0.5}};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(beam_search_suite)

BOOST_AUTO_TEST_CASE(a_wider_beam_finds_what_greedy_misses) {
  beam_search greedy(3, 1, 2, {});
  auto g = run(greedy, hesitant);
  BOOST_REQUIRE(g.size() == 1u);
  BOOST_TEST(g[0].tokens == (std::vector<int32_t>{1, 3}), boost::test_tools::per_element());
  BOOST_TEST(g[0].cum_logprob == std::log(0.6) + std::log(0.3), boost::test_tools::tolerance(1e-12));

  beam_search wide(3, 2, 2, {});
  auto w = run(wide, hesitant);
  BOOST_REQUIRE(w.size() == 2u);
  BOOST_TEST(w[0].tokens == (std::vector<int32_t>{2, 5}), boost::test_tools::per_element());
  BOOST_TEST(w[0].cum_logprob == std::log(0.4) + std::log(0.9), boost::test_tools::tolerance(1e-12));
  BOOST_TEST(w[1].tokens == (std::vector<int32_t>{1, 3}), boost::test_tools::per_element());  // ties keep rank order
  BOOST_TEST(w[0].cum_logprob > w[1].cum_logprob);
}

// A stop id finishes a beam, which then competes with the live ones at the end by score; the
// length penalty divides by (prompt + tokens) ^ penalty, so a higher one favours the longer beam.
BOOST_AUTO_TEST_CASE(stop_ids_finish_beams_and_length_penalty_weighs_them) {
  static constexpr int32_t stop = 9;
  // First token: the stop (0.5) or 7 (0.5); after 7 the model is sure: 7 again (0.9).
  auto model = [](const std::vector<int32_t>& t) -> std::vector<std::pair<int32_t, double>> {
    if (t.empty()) return {{stop, 0.5}, {7, 0.5}};
    return {{7, 0.9}, {stop, 0.1}};
  };
  beam_search short_wins(1, 2, 3, {stop}, 1.0);
  auto a = run(short_wins, model);
  BOOST_REQUIRE(!a.empty());
  // [stop]: log 0.5 / 1 against 7 7 7: (log 0.5 + 2 log 0.9) / 4 = -0.226 > -0.693.
  BOOST_TEST(a[0].tokens == (std::vector<int32_t>{7, 7, 7}), boost::test_tools::per_element());
  beam_search no_penalty(1, 2, 3, {stop}, 0.0);  // plain cumulative log-probability
  auto b = run(no_penalty, model);
  BOOST_TEST(b[0].stopped);                       // log 0.5 > log 0.5 + 2 log 0.9
  BOOST_TEST(b[0].tokens.empty());                // the stop id itself is left out
  beam_search kept(1, 2, 3, {stop}, 0.0, /*include_stop=*/true);
  auto c = run(kept, model);
  BOOST_TEST(c[0].tokens == (std::vector<int32_t>{stop}), boost::test_tools::per_element());
  // The score's length leaves out a final stop id it includes, as vLLM's does.
  beam_search penalised(4, 1, 1, {stop}, 1.0, true);
  beam stopped{{stop}, std::log(0.5), true};
  BOOST_TEST(penalised.score(stopped) == std::log(0.5) / 4.0, boost::test_tools::tolerance(1e-12));
}

// max_tokens rounds at most; when every candidate is a stop id, no beam is left and the loop ends.
BOOST_AUTO_TEST_CASE(rounds_end_at_max_tokens_or_when_no_beam_is_left) {
  int calls = 0;
  beam_search s(2, 3, 5, {0});
  run(s, [&](const std::vector<int32_t>& t) -> std::vector<std::pair<int32_t, double>> {
    ++calls;
    return {{static_cast<int32_t>(10 + t.size()), 0.7}, {static_cast<int32_t>(20 + t.size()), 0.3}};
  });
  BOOST_TEST(calls == 1 + 2 + 3 + 3 + 3);        // the beam grows to the width, then stays
  BOOST_REQUIRE(s.best().size() == 3u);
  BOOST_TEST(s.best()[0].tokens == (std::vector<int32_t>{10, 11, 12, 13, 14}), boost::test_tools::per_element());
  beam_search all_stop(2, 3, 5, {0, 1});
  auto r = run(all_stop, [](const std::vector<int32_t>&) -> std::vector<std::pair<int32_t, double>> {
    return {{0, 0.6}, {1, 0.4}};
  });
  BOOST_TEST(all_stop.done());
  BOOST_TEST(r.size() == 2u);
  BOOST_TEST(r[0].stopped);
}

BOOST_AUTO_TEST_SUITE_END()
