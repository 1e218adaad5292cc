// matcher: the allowed-token mask equals, token by token, what accepting each token's bytes would
// say (brute force over the whole Qwen3 vocabulary) along random walks; end ids only once the
// grammar is complete; a long string keeps the state set small (the stack stays flat).
#include <boost/test/unit_test.hpp>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "runtime/core/error.hpp"
#include "runtime/grammar/grammar.hpp"
#include "runtime/grammar/matcher.hpp"
#include "runtime/tokenizer/tokenizer.hpp"

using namespace troupe::grammar;

namespace {

const std::shared_ptr<const token_table>& qwen_tokens() {
  static const troupe::tokenizer tok(TROUPE_SOURCE_DIR "/models/qwen3-tokenizer");
  static const auto table = token_table::from_tokenizer(tok);
  return table;
}

bool bit(std::span<const uint64_t> mask, size_t id) { return (mask[id / 64] >> (id % 64)) & 1; }

const char* kJsonish = R"(
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null")
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9]+)? ws
ws     ::= | " " | "\n" [ \t]{0,20}
)";

}  // namespace

BOOST_AUTO_TEST_CASE(mask_equals_brute_force_along_random_walks) {
  const auto& tokens = qwen_tokens();
  const int32_t eos = 151645;  // <|im_end|>, special: no bytes
  for (const char* gbnf : {kJsonish, "root ::= (\"yes\" | \"no\" | \"maybe so\") \"!\"?",
                           "root ::= [0-9]{3} \"-\" [a-z]+ \"é\""}) {
    auto g = std::make_shared<const grammar>(parse_gbnf(gbnf));
    std::mt19937 rng(7);
    for (int walk = 0; walk < 3; ++walk) {
      matcher m(g, tokens, {eos});
      for (int step = 0; step < 40 && !m.is_finished(); ++step) {
        const std::vector<uint64_t> mask(m.allowed_mask().begin(), m.allowed_mask().end());
        std::vector<int32_t> allowed;
        for (size_t id = 0; id < tokens->id_limit(); ++id) {
          const std::string_view b = tokens->bytes(static_cast<int32_t>(id));
          const bool want = id == static_cast<size_t>(eos) ? m.is_complete() : !b.empty() && m.can_accept(b);
          if (bit(mask, id) != want) {
            BOOST_TEST(bit(mask, id) == want, "walk " << walk << " step " << step << " id " << id);
            return;
          }
          if (want) allowed.push_back(static_cast<int32_t>(id));
        }
        BOOST_REQUIRE(!allowed.empty());
        const int32_t pick = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
        BOOST_REQUIRE(m.accept_token(pick));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(end_ids_only_when_complete_and_then_nothing) {
  auto g = std::make_shared<const grammar>(parse_gbnf("root ::= \"ab\" \"c\"?"));
  auto tokens = std::make_shared<token_table>(std::vector<std::string>{"a", "b", "ab", "c", "", "abc"});
  matcher m(g, tokens, {4});
  auto allowed = [&] {
    std::vector<int> ids;
    for (int id = 0; id < 6; ++id)
      if (bit(m.allowed_mask(), static_cast<size_t>(id))) ids.push_back(id);
    return ids;
  };
  BOOST_TEST(allowed() == (std::vector<int>{0, 2, 5}), boost::test_tools::per_element());
  BOOST_TEST(!m.accept_token(4));  // not complete yet
  BOOST_TEST(!m.accept_token(1));
  BOOST_TEST(m.accept_token(0));
  BOOST_TEST(allowed() == (std::vector<int>{1}), boost::test_tools::per_element());
  BOOST_TEST(m.accept_token(1));
  BOOST_TEST(m.is_complete());
  BOOST_TEST(allowed() == (std::vector<int>{3, 4}), boost::test_tools::per_element());
  BOOST_TEST(m.accept_token(4));
  BOOST_TEST(m.is_finished());
  BOOST_TEST(allowed().empty());
  BOOST_TEST(!m.accept_token(3));
  // mask_logits: disallowed ids and ids past the table become -inf, the rest are untouched.
  matcher fresh(g, tokens, {4});
  std::vector<float> row(8, 1.0f);
  fresh.mask_logits(row);
  const std::vector<float> want = {1, -INFINITY, 1, -INFINITY, -INFINITY, 1, -INFINITY, -INFINITY};
  BOOST_TEST(row == want, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_refused_token_leaves_the_matcher_unchanged) {
  auto g = std::make_shared<const grammar>(parse_gbnf("root ::= \"abc\""));
  auto tokens = std::make_shared<token_table>(std::vector<std::string>{"ab", "abd", "c"});
  matcher m(g, tokens, {});
  BOOST_TEST(!m.accept_token(1));
  BOOST_TEST(!m.accept_token(7));   // outside the table
  BOOST_TEST(!m.accept_token(-1));
  BOOST_TEST(m.accept_token(0));
  BOOST_TEST(!m.accept_bytes("cd"));
  BOOST_TEST(m.accept_token(2));
  BOOST_TEST(m.is_complete());
}

BOOST_AUTO_TEST_CASE(a_long_string_keeps_few_states) {
  // Right recursion (R ::= char R) returns to the same state after every character: a 20,000-
  // character value must not build a state (or a stack frame) per character.
  auto g = std::make_shared<const grammar>(parse_gbnf(kJsonish));
  matcher m(g, qwen_tokens(), {});
  BOOST_REQUIRE(m.accept_bytes("{\"k\": \""));
  for (int i = 0; i < 20000; ++i) BOOST_REQUIRE(m.accept_bytes(i % 7 ? "x" : "é"));
  BOOST_REQUIRE(m.accept_bytes("\"}"));
  BOOST_TEST(m.is_complete());
  BOOST_TEST(m.num_states() < 40u);
  // Nesting is what the stack is for: 500 levels deep, then closed.
  matcher deep(g, qwen_tokens(), {});
  for (int i = 0; i < 500; ++i) BOOST_REQUIRE(deep.accept_bytes("{\"a\":"));
  BOOST_REQUIRE(deep.accept_bytes("1"));
  for (int i = 0; i < 499; ++i) BOOST_REQUIRE(deep.accept_bytes("}"));
  BOOST_TEST(!deep.is_complete());
  BOOST_TEST(!deep.can_accept("]"));
  BOOST_REQUIRE(deep.accept_bytes("}"));
  BOOST_TEST(deep.is_complete());
}

BOOST_AUTO_TEST_CASE(an_exploding_grammar_is_refused_not_run) {
  // After n a's the parse may expect any of the 2^n strings of b's and c's: 2^n stacks.
  auto g = std::make_shared<const grammar>(parse_gbnf("root ::= s\ns ::= \"a\" s \"b\" | \"a\" s \"c\" | \"\""));
  matcher m(g, std::make_shared<token_table>(std::vector<std::string>{"a"}), {});
  BOOST_REQUIRE(m.accept_bytes(std::string(10, 'a')));  // 1,024 stacks: fine
  BOOST_REQUIRE(m.can_accept("bcbbcbbcbb"));
  try {
    m.accept_bytes(std::string(20, 'a'));
    BOOST_FAIL("expected a refusal");
  } catch (const troupe::error& e) {
    BOOST_TEST(std::string(e.what()).find("too ambiguous") != std::string::npos, e.what());
  }
}
