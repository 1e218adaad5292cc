// parse_gbnf: refusals name the line, column and what was wrong; the languages of accepted
// grammars equal those of the same expressions as std::regex (ECMAScript), on every string up to
// a length over a small alphabet.
#define BOOST_TEST_MODULE grammar
#include <boost/test/unit_test.hpp>

#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "runtime/core/error.hpp"
#include "runtime/grammar/grammar.hpp"
#include "runtime/grammar/matcher.hpp"
#include "tests/runtime/grammar/accepts.hpp"

using namespace troupe::grammar;
using troupe::grammar::test::accepts;

namespace {

std::string refusal(const std::string& gbnf) {
  try {
    parse_gbnf(gbnf);
  } catch (const troupe::error& e) {
    BOOST_TEST((e.code() == troupe::errc::invalid_argument));
    return e.what();
  }
  return "";
}

void all_strings(const std::string& alphabet, size_t max_len, std::vector<std::string>& out) {
  out = {""};
  for (size_t i = 0, begin = 0; i < max_len; ++i) {
    const size_t end = out.size();
    for (size_t j = begin; j < end; ++j)
      for (char c : alphabet) out.push_back(out[j] + c);
    begin = end;
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(refusals_name_line_column_and_cause) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"root \"a\"", "line 1, column 6: expected '::=' after rule name 'root'"},
      {"root ::= \"a\"\nx ::= y", "line 2, column 7: rule 'y' is used but never defined"},
      {"x ::= \"a\"", "no rule named 'root'"},
      {"root ::= \"abc", "line 1, column 10: unterminated string literal"},
      {"root ::= [z-a]", "class range is backwards"},
      {"root ::= [^\\x00-\\U0010FFFF]", "character class matches nothing"},
      {"root ::= root \"a\" | \"b\"", "rule 'root' can recurse without consuming input"},
      {"root ::= x\nx ::= \"\"? root", "can recurse without consuming input"},
      {"root ::= (\"a\"?)*", "can recurse without consuming input"},
      {"root ::= \"a\"{2000}", "repetition count over 1000"},
      {"root ::= \"a\"{3,2}", "n < m"},
      {"root ::= \"a\"\nroot ::= \"b\"", "line 2, column 1: rule 'root' is defined twice"},
      {"root ::= (\"a\" | \"b\"", "'(' is never closed"},
      {"root ::= \"a\" )", "unmatched ')'"},
      {"root ::= \"\\q\"", "unknown escape '\\q'"},
      {"root ::= \"\\uD800\"", "not a Unicode scalar value"},
      {"root ::= @", "unexpected character '@'"},
      {"root ::= \"\xFF\"", "invalid UTF-8"},
      {"root ::= ((\"a\"{1000}){1000}){1000}", "size limit"},
  };
  for (const auto& [text, want] : cases) {
    const std::string got = refusal(text);
    BOOST_TEST_CONTEXT(text) { BOOST_TEST(got.find(want) != std::string::npos, got << " lacks " << want); }
    BOOST_TEST(got.rfind("grammar: ", 0) == 0u);
  }
}

BOOST_AUTO_TEST_CASE(languages_equal_std_regex) {
  // (GBNF, the same language as an ECMAScript regex)
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"root ::= \"ab\"", "ab"},
      {"root ::= [a-c]* \"d\" | (\"ab\")+", "[a-c]*d|(ab)+"},
      {"root ::= x x\nx ::= \"a\" | \"b\" x", "(a|b+a)(a|b+a)"},
      {"root ::= [^a]{2,3}", "[^a]{2,3}"},
      {"root ::= \"a\"{2,} \"b\"?", "a{2,}b?"},
      {"root ::= (\"a\" | \"bc\"){0,3} \"d\"{1}", "(a|bc){0,3}d{1}"},
      {"root ::= \"\" | \"a\" root \"b\"", "|ab|aabb|aaabbb"},  // not regular; short enough here
      {"root ::= (\"a\" \"b\"*)* \"c\"", "(ab*)*c"},
      {"# comment\nroot ::= [abc] # trailing\n  [d]?", "[abc]d?"},
      {"root ::= .+", ".+"},
      {"root ::= ws \"a\" ws\nws ::= [ ]{0,2}", " {0,2}a {0,2}"},
  };
  std::vector<std::string> inputs;
  all_strings("abcd ", 6, inputs);
  for (const auto& [gbnf, re] : cases) {
    auto g = std::make_shared<const grammar>(parse_gbnf(gbnf));
    const std::regex reference(re, std::regex::ECMAScript);
    int agree = 0;
    for (const std::string& s : inputs) {
      if (s.size() > 6) continue;
      const bool want = std::regex_match(s, reference);
      BOOST_TEST_CONTEXT(gbnf << " on '" << s << "'") { BOOST_TEST(accepts(g, s) == want); }
      agree += want;
    }
    BOOST_TEST(agree > 0, gbnf << " accepts nothing among the inputs");
  }
}

BOOST_AUTO_TEST_CASE(classes_work_on_code_points_through_utf8) {
  auto g = std::make_shared<const grammar>(parse_gbnf("root ::= [α-ω] [^\"\\\\]  \"€\" ."));
  BOOST_TEST(accepts(g, "βé€\U0001F600"));  // é and the emoji are one character each
  BOOST_TEST(accepts(g, "ωé€a"));
  BOOST_TEST(!accepts(g, "Ax€a"));     // A is outside α-ω
  BOOST_TEST(!accepts(g, "β\"€a"));    // the quote is excluded
  BOOST_TEST(!accepts(g, "βx€\xFF"));  // not UTF-8
  BOOST_TEST(!accepts(g, "βx€\xED\xA0\x80"));  // a surrogate has no UTF-8 form
  // Every code point of a negated class's edges, one by one.
  auto any = std::make_shared<const grammar>(parse_gbnf("root ::= [^b-y\\u00E9\\U0001F600]"));
  for (uint32_t cp : {0x0u, 0x61u, 0x62u, 0x79u, 0x7Au, 0x7Fu, 0x80u, 0xE8u, 0xE9u, 0xEAu, 0x7FFu, 0x800u,
                      0xD7FFu, 0xE000u, 0xFFFFu, 0x10000u, 0x1F5FFu, 0x1F600u, 0x1F601u, 0x10FFFFu}) {
    std::string s;
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else if (cp < 0x800) {
      s += static_cast<char>(0xC0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      s += static_cast<char>(0xE0 | (cp >> 12));
      s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      s += static_cast<char>(0xF0 | (cp >> 18));
      s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    }
    const bool excluded = (cp >= 0x62 && cp <= 0x79) || cp == 0xE9 || cp == 0x1F600;
    BOOST_TEST(accepts(any, s) == !excluded, "U+" << std::hex << cp);
  }
}

BOOST_AUTO_TEST_CASE(gbnf_literal_round_trips) {
  for (std::string s : {std::string("plain"), std::string("q\"b\\s"), std::string("nl\n\r\t"),
                        std::string("ctl\x01\x7F"), std::string("ünï€")}) {
    auto g = std::make_shared<const grammar>(parse_gbnf("root ::= " + gbnf_literal(s)));
    BOOST_TEST(accepts(g, s), s);
    BOOST_TEST(!accepts(g, s + "x"));
  }
}
