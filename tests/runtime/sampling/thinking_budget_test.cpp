// vLLM's thinking_token_budget through sampler::sample: </think> is forced once the think block
// (opened in the output or by the prompt) holds the budget's tokens, never before, never after it
// closed; one RNG draw per call whatever happens; a grammar that refuses </think> there wins.
#include <boost/test/unit_test.hpp>

#include <vector>

#include "runtime/core/error.hpp"
#include "runtime/grammar/automaton.hpp"
#include "runtime/grammar/grammar.hpp"
#include "runtime/grammar/token_table.hpp"
#include "runtime/sampling/thinking_budget.hpp"
#include "tests/runtime/sampling/test_util.hpp"

using troupe::sampler;
using troupe::sampling_params;

namespace {

constexpr int32_t kStart = 10, kEnd = 11, kTop = 5, kVocab = 32;

sampling_params budget(int32_t n, bool in_prompt = false) {
  sampling_params p;
  p.temperature = 0.0f;
  p.thinking_token_budget = n;
  p.think_start_id = kStart;
  p.think_end_id = kEnd;
  p.thinking_opened_in_prompt = in_prompt;
  return p;
}

// A row whose argmax is kTop, </think> unlikely.
std::vector<float> row() {
  std::vector<float> r(kVocab, 0.0f);
  r[kTop] = 5.0f;
  r[kEnd] = -3.0f;
  return r;
}

// Greedy decoding of `steps` tokens after `output` with sampler `s`: what it gives.
std::vector<int32_t> decode(sampler& s, std::vector<int32_t> output, int steps) {
  const std::vector<int32_t> prompt = {1, 2};
  for (int i = 0; i < steps; ++i) {
    auto r = row();
    output.push_back(s.sample(r, prompt, output));
  }
  return output;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(thinking_budget_suite)

BOOST_AUTO_TEST_CASE(the_block_ends_after_the_budget) {
  sampler s(budget(3));
  // <think> then three thinking tokens, then </think> forced, then the answer as the logits say.
  const std::vector<int32_t> expected = {kStart, kTop, kTop, kTop, kEnd, kTop, kTop};
  BOOST_TEST(decode(s, {kStart}, 6) == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_prompt_that_opened_the_block_counts_from_the_first_token) {
  sampler s(budget(2, /*in_prompt=*/true));
  const std::vector<int32_t> expected = {kTop, kTop, kEnd, kTop};
  BOOST_TEST(decode(s, {}, 4) == expected, boost::test_tools::per_element());
  sampler zero(budget(0, true));
  const std::vector<int32_t> at_once = {kEnd, kTop};
  BOOST_TEST(decode(zero, {}, 2) == at_once, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(no_block_or_a_closed_one_is_left_alone) {
  sampler s(budget(1));
  const std::vector<int32_t> free = {kTop, kTop, kTop, kTop};
  BOOST_TEST(decode(s, {}, 4) == free, boost::test_tools::per_element());  // never opened
  sampler closed(budget(1));
  const std::vector<int32_t> after = {kStart, kEnd, kTop, kTop, kTop};
  BOOST_TEST(decode(closed, {kStart, kEnd}, 3) == after, boost::test_tools::per_element());
  // Closed by the model itself within budget: nothing forced later.
  sampler within(budget(3));
  const std::vector<int32_t> own = {kStart, kTop, kEnd, kTop, kTop, kTop, kTop};
  BOOST_TEST(decode(within, {kStart, kTop, kEnd}, 4) == own, boost::test_tools::per_element());
}

// Every call takes one draw, forced or not: a seeded sampler's later draws are the same as those
// of one without a budget that sampled the same number of tokens.
BOOST_AUTO_TEST_CASE(a_forced_token_takes_its_draw) {
  auto p = budget(1);
  p.temperature = 1.0f;
  p.has_seed = true;
  p.seed = 42;
  auto q = p;
  q.thinking_token_budget = -1;
  sampler with(p), without(q);
  std::vector<float> flat(kVocab, 0.0f);
  flat[kEnd] = -50.0f;  // never drawn freely
  const std::vector<int32_t> prompt = {1};
  std::vector<int32_t> out_a = {kStart, 3}, out_b = out_a;
  auto r = flat;
  BOOST_TEST(with.sample(r, prompt, out_a) == kEnd);
  r = flat;
  without.sample(r, prompt, out_b);
  out_a.push_back(kEnd);
  out_b.push_back(kEnd);  // the same output from here on
  for (int i = 0; i < 20; ++i) {
    auto ra = flat, rb = flat;
    const int32_t a = with.sample(ra, prompt, out_a), b = without.sample(rb, prompt, out_b);
    BOOST_TEST(a == b);
    out_a.push_back(a);
    out_b.push_back(a);
  }
}

// The output the sampler sees may start over (a sequence rebuilt): the budget reads it afresh.
BOOST_AUTO_TEST_CASE(a_shorter_output_is_read_again) {
  troupe::sampling_detail::thinking_budget b(budget(2));
  const std::vector<int32_t> long_one = {kStart, 1, 2};
  BOOST_TEST(b.forced(long_one).value_or(-1) == kEnd);
  const std::vector<int32_t> shorter = {kStart, 1};
  BOOST_TEST(!b.forced(shorter).has_value());
  const std::vector<int32_t> closed = {kStart, 1, kEnd, 4, 5, 6};
  BOOST_TEST(!b.forced(closed).has_value());
}

// With structured output: a grammar kept out of the thinking (separate_reasoning) lets </think>
// be forced and then shapes the answer; a grammar that holds from the first token and has no
// </think> in it overrules the budget (the request's output must match it).
BOOST_AUTO_TEST_CASE(a_grammar_that_refuses_the_end_wins) {
  std::vector<std::string> tokens(kVocab, "q");
  tokens[kTop] = "x";
  tokens[kStart] = "<think>";
  tokens[kEnd] = "</think>";
  tokens[1] = "y";
  auto automaton = std::make_shared<troupe::grammar::automaton>(
      std::make_shared<const troupe::grammar::grammar>(troupe::grammar::parse_gbnf("root ::= \"y\" \"x\"*")),
      std::make_shared<const troupe::grammar::token_table>(std::move(tokens)));
  auto p = budget(1, /*in_prompt=*/true);
  p.grammar = automaton;
  p.grammar_think_start = kStart;
  p.grammar_think_end = kEnd;
  p.grammar_in_thinking = true;
  sampler gated(p);
  auto r = row();
  r[1] = 1.0f;  // "y": the grammar's first token, second to "x" in the logits
  auto step = [&](sampler& s, std::vector<int32_t>& out) {
    auto x = r;
    out.push_back(s.sample(x, {}, out));
  };
  std::vector<int32_t> out;
  for (int i = 0; i < 4; ++i) step(gated, out);
  const std::vector<int32_t> thought_then_answer = {kTop, kEnd, 1, kTop};  // one thought, </think>, "y", "x"
  BOOST_TEST(out == thought_then_answer, boost::test_tools::per_element());
  p.grammar_think_start = p.grammar_think_end = -1;  // the grammar from the first token
  p.grammar_in_thinking = false;
  sampler strict(p);
  out.clear();
  for (int i = 0; i < 3; ++i) step(strict, out);
  const std::vector<int32_t> grammar_only = {1, kTop, kTop};
  BOOST_TEST(out == grammar_only, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(bad_budgets_are_refused_naming_the_field) {
  auto p = budget(-2);
  BOOST_CHECK_EXCEPTION(sampler{p}, troupe::error, [](const troupe::error& e) {
    return std::string(e.what()).find("thinking_token_budget") != std::string::npos;
  });
  p = budget(4);
  p.think_end_id = -1;
  BOOST_CHECK_EXCEPTION(sampler{p}, troupe::error, [](const troupe::error& e) {
    return std::string(e.what()).find("think_end_id") != std::string::npos;
  });
}

BOOST_AUTO_TEST_SUITE_END()
