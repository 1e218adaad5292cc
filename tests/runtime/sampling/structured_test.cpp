// Structured output through sampler::sample: only the grammar's tokens come, on the greedy and
// the sampling paths; stop ids only once it is complete; replay() keeps the grammar in step; a
// grammar that other rules leave no token gets a clear error.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "runtime/core/error.hpp"
#include "runtime/grammar/automaton.hpp"
#include "runtime/sampling/sampler.hpp"

using troupe::sampler;
using troupe::sampling_params;
namespace grammar = troupe::grammar;

namespace {

// ids: 0 "a", 1 "b", 2 "ab", 3 "c", 4 EOS (no bytes), 5 "ba"
constexpr int32_t kEos = 4;

sampling_params with_grammar(const std::string& gbnf,
                             std::vector<std::string> tokens = {"a", "b", "ab", "c", "", "ba"}) {
  sampling_params p;
  p.grammar = std::make_shared<grammar::automaton>(std::make_shared<const grammar::grammar>(grammar::parse_gbnf(gbnf)),
                                                   std::make_shared<const grammar::token_table>(std::move(tokens)));
  p.grammar_end_ids = {kEos};
  return p;
}

// Logits that prefer, in order: c, EOS, ba, b, ab, a (so the grammar must overrule them).
std::vector<float> row() { return {0.0f, 2.0f, 1.0f, 5.0f, 4.0f, 3.0f}; }

}  // namespace

BOOST_AUTO_TEST_CASE(greedy_follows_the_grammar_then_ends) {
  auto p = with_grammar("root ::= \"ab\" \"ba\"?");
  p.temperature = 0;
  sampler s(p);
  std::vector<int32_t> out;
  for (int i = 0; i < 4; ++i) {
    auto r = row();
    out.push_back(s.sample(r, {}, out));
    if (out.back() == kEos) break;
  }
  // First "a" (0) or "ab" (2): "ab" scores higher. Then, complete, "b", "ba" or EOS: EOS scores
  // highest; "c" (the best of all) is never allowed.
  BOOST_TEST(out == (std::vector<int32_t>{2, kEos}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(sampling_draws_only_allowed_tokens) {
  auto p = with_grammar("root ::= (\"a\" | \"b\")+ \"c\"");
  p.temperature = 1.0f;
  p.seed = 3;
  p.has_seed = true;
  for (int trial = 0; trial < 20; ++trial) {
    p.seed = static_cast<uint64_t>(trial);
    sampler s(p);
    std::vector<int32_t> out;
    std::string text;
    const std::vector<std::string> bytes = {"a", "b", "ab", "c", "", "ba"};
    for (int i = 0; i < 50; ++i) {
      auto r = row();
      const int32_t id = s.sample(r, {}, out);
      out.push_back(id);
      if (id == kEos) break;
      text += bytes[static_cast<size_t>(id)];
    }
    BOOST_REQUIRE(!out.empty());
    // Either it ended (text is a sentence, then EOS) or ran out of steps inside the language.
    if (out.back() == kEos) {
      BOOST_TEST(text.size() >= 2u);
      BOOST_TEST(text.back() == 'c');
      BOOST_TEST(text.substr(0, text.size() - 1).find_first_not_of("ab") == std::string::npos, text);
    } else {
      BOOST_TEST(text.find_first_not_of("abc") == std::string::npos, text);
    }
  }
}

BOOST_AUTO_TEST_CASE(replay_keeps_rng_and_grammar_in_step) {
  auto p = with_grammar("root ::= (\"a\" | \"b\" | \"c\")* ");
  p.grammar_end_ids = {};  // never ends: twelve draws in a row
  p.temperature = 1.0f;
  p.seed = 11;
  p.has_seed = true;
  sampler a(p);
  std::vector<int32_t> out;
  for (int i = 0; i < 6; ++i) {
    auto r = row();
    out.push_back(a.sample(r, {}, out));
  }
  sampler b(p);
  for (int32_t id : out) b.replay(id);
  for (int i = 0; i < 6; ++i) {
    auto ra = row(), rb = row();
    const int32_t x = a.sample(ra, {}, out), y = b.sample(rb, {}, out);
    BOOST_TEST(x == y);
    out.push_back(x);
  }
  // A known token the grammar refuses is an error, not a silent desync.
  sampler c(with_grammar("root ::= \"a\""));
  BOOST_CHECK_THROW(c.replay(1), troupe::error);
}

BOOST_AUTO_TEST_CASE(no_token_left_is_a_clear_error) {
  auto p = with_grammar("root ::= \"c\"");
  p.allowed_token_ids = {0, 1};  // the grammar wants c (3)
  sampler s(p);
  auto r = row();
  try {
    s.sample(r, {}, {});
    BOOST_FAIL("expected an error");
  } catch (const troupe::error& e) {
    BOOST_TEST(std::string(e.what()).find("no token allowed by the grammar") != std::string::npos, e.what());
  }
  // Complete, but min_tokens keeps EOS out.
  auto q = with_grammar("root ::= \"c\"");
  q.min_tokens = 5;
  q.min_tokens_stop_ids = {kEos};
  sampler t(q);
  auto r1 = row();
  BOOST_TEST(t.sample(r1, {}, {}) == 3);
  auto r2 = row();
  try {
    t.sample(r2, {}, std::vector<int32_t>{3});
    BOOST_FAIL("expected an error");
  } catch (const troupe::error& e) {
    BOOST_TEST(std::string(e.what()).find("the grammar is complete") != std::string::npos, e.what());
  }
}

// separate_reasoning: <think> may open the output, nothing is masked inside the block, and the
// grammar holds from </think> on; a prompt that opened the block starts inside it.
BOOST_AUTO_TEST_CASE(the_grammar_waits_for_the_end_of_thinking) {
  // ids: 0 "a", 1 "b", 2 "ab", 3 "c", 4 EOS, 5 "ba", 6 <think>, 7 </think>
  auto p = with_grammar("root ::= \"c\"", {"a", "b", "ab", "c", "", "ba", "<think>", "</think>"});
  p.grammar_think_start = 6;
  p.grammar_think_end = 7;
  p.temperature = 0;
  auto run = [](sampling_params q, std::vector<std::vector<float>> rows) {
    sampler s(q);
    std::vector<int32_t> out;
    for (auto& r : rows) out.push_back(s.sample(r, {}, out));
    return out;
  };
  // Rows favour, in turn: <think>, a, </think>, a (masked now: c), then EOS.
  const std::vector<std::vector<float>> rows = {{0, 0, 0, 1, 0, 0, 9, 0},
                                                {9, 0, 0, 1, 0, 0, 0, 0},
                                                {0, 0, 0, 1, 0, 0, 0, 9},
                                                {9, 0, 0, 1, 0, 0, 0, 0},
                                                {9, 0, 0, 1, 5, 0, 0, 0}};
  BOOST_TEST(run(p, rows) == (std::vector<int32_t>{6, 0, 7, 3, kEos}), boost::test_tools::per_element());
  // Without thinking the first token is the grammar's (c), whatever the row favours.
  BOOST_TEST(run(p, {rows[1]}) == (std::vector<int32_t>{3}), boost::test_tools::per_element());
  // The prompt opened the block: unmasked until </think>.
  p.grammar_in_thinking = true;
  BOOST_TEST(run(p, {rows[1], rows[2], rows[3]}) == (std::vector<int32_t>{0, 7, 3}), boost::test_tools::per_element());
  // No think ids: the grammar holds from the first token (<think> is not in its language).
  p.grammar_think_start = p.grammar_think_end = -1;
  p.grammar_in_thinking = false;
  BOOST_TEST(run(p, {rows[0]}) == (std::vector<int32_t>{3}), boost::test_tools::per_element());
}
