// Whitespace handling exactly as Jinja2 with trim_blocks and lstrip_blocks (transformers'
// settings), string literal escapes, and lexer errors with their line.
#include <boost/test/unit_test.hpp>

#include "runtime/core/error.hpp"
#include "tests/runtime/tokenizer/jinja/render.hpp"

using troupe::jinja::test::render;

BOOST_AUTO_TEST_SUITE(lexer)

BOOST_AUTO_TEST_CASE(trim_and_lstrip_blocks) {
  // The newline after a block tag goes; indentation before a block tag goes.
  BOOST_TEST(render("a\n{% if true %}\nb\n{% endif %}\nc") == "a\nb\nc");
  BOOST_TEST(render("a\n    {% if true %}\n    b\n    {% endif %}\nc") == "a\n    b\nc");
  // Expressions are not trimmed.
  BOOST_TEST(render("{{ 'x' }}\ny") == "x\ny");
  // Indentation before a tag that follows text on the same line stays.
  BOOST_TEST(render("a  {% if true %}b{% endif %}") == "a  b");
  // Comments are dropped and trimmed like blocks.
  BOOST_TEST(render("a\n  {# note #}\nb") == "a\nb");
}

BOOST_AUTO_TEST_CASE(minus_and_plus_markers) {
  BOOST_TEST(render("a  \n  {{- 'b' -}}  \n  c") == "abc");
  BOOST_TEST(render("a\n{%- if true -%}\n  b  \n{%- endif %}") == "ab");
  BOOST_TEST(render("a\n  {%+ if true %}b{% endif %}") == "a\n  b");      // + keeps indentation
  BOOST_TEST(render("{% if true +%}\nb{% endif %}") == "\nb");              // + keeps the newline
}

BOOST_AUTO_TEST_CASE(newlines_are_normalised_and_the_last_one_dropped) {
  BOOST_TEST(render("a\r\nb\rc\n") == "a\nb\nc");
  BOOST_TEST(render("a\n\n") == "a\n");
}

BOOST_AUTO_TEST_CASE(string_literal_escapes) {
  BOOST_TEST(render(R"({{ 'a\nb\t\'q\' \"d\" \\ \u00e9 \x41 \q' }})") == "a\nb\t'q' \"d\" \\ \xC3\xA9 A \\q");
  BOOST_TEST(render(R"({{ "it's" 'adjacent' }})") == "it'sadjacent");
}

BOOST_AUTO_TEST_CASE(dict_literal_braces_do_not_close_the_tag) {
  BOOST_TEST(render("{{ {'a': {'b': 1}}['a']['b'] }}") == "1");
}

BOOST_AUTO_TEST_CASE(errors_name_the_line) {
  try {
    render("ok\n\n{{ 'unterminated }}");
    BOOST_ERROR("no error");
  } catch (const troupe::error& e) {
    BOOST_TEST(std::string(e.what()) == "chat template line 3: unterminated string literal");
  }
  BOOST_CHECK_THROW(render("{{ a "), troupe::error);
  BOOST_CHECK_THROW(render("{# open comment"), troupe::error);
  BOOST_CHECK_THROW(render("{{ a $ b }}"), troupe::error);
}

BOOST_AUTO_TEST_SUITE_END()
