// parse_json_in_order: the same value as nlohmann's ordered parse (key order kept), duplicate
// keys refused, bad text refused with nlohmann's own error type, and large objects in linear time.
#include <boost/test/unit_test.hpp>
#include <stdexcept>
#include <string>

#include "runtime/core/json_in_order.hpp"

using troupe::parse_json_in_order;
using ojson = nlohmann::ordered_json;

BOOST_AUTO_TEST_SUITE(json_in_order)

BOOST_AUTO_TEST_CASE(same_value_and_key_order_as_nlohmann) {
  const char* docs[] = {
      R"({"z": 1, "a": [1, -2, 3.5, 1e300, 18446744073709551615], "m": {"y": null, "b": true, "x": false}})",
      R"([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
          "properties": {"city": {"type": "string", "description": "caf\u00e9 \"quoted\" \ud83d\ude00"}},
          "required": ["city"]}}}, [], {}, [[[]]], ""])",
      R"("just a string")", "42", "-7", "null", R"({"": {"": [{"": 0}]}})",
  };
  for (const char* d : docs) {
    const ojson ours = parse_json_in_order(d);
    const ojson theirs = ojson::parse(d);
    BOOST_TEST(ours == theirs, d);
    BOOST_TEST(ours.dump() == theirs.dump(), d);  // same key order, same number types
  }
  BOOST_TEST(parse_json_in_order(R"({"z": 1, "a": 2})").dump() == R"({"z":1,"a":2})");
}

BOOST_AUTO_TEST_CASE(duplicate_keys_are_refused_at_any_depth) {
  BOOST_CHECK_THROW(parse_json_in_order(R"({"a": 1, "a": 2})"), std::invalid_argument);
  BOOST_CHECK_THROW(parse_json_in_order(R"([{"x": {"k": 1, "j": 2, "k": 3}}])"), std::invalid_argument);
  // The same key in sibling objects is not a duplicate.
  BOOST_TEST(parse_json_in_order(R"([{"k": 1}, {"k": 2}, {"o": {"k": 3}}])").size() == 3u);
}

BOOST_AUTO_TEST_CASE(bad_text_throws_nlohmanns_parse_error) {
  for (const char* bad : {"", "{", R"({"a": })", "[1, 2", "tru", R"({"a" 1})", "[1] x", "\"\xff\""})
    BOOST_CHECK_THROW(parse_json_in_order(bad), ojson::parse_error);
}

BOOST_AUTO_TEST_CASE(an_object_of_80000_keys_keeps_them_all_in_order) {
  // ordered_json::parse needs ~20 s for this on a 2-core Zen 3 (a quadratic key search); this
  // parser well under a second, so a regression shows as this suite's time multiplying.
  std::string text = "{";
  for (int i = 0; i < 80000; ++i) {
    if (i > 0) text += ',';
    text += "\"k";
    text += std::to_string(79999 - i);
    text += "\":";
    text += std::to_string(i);
  }
  text += '}';
  const ojson j = parse_json_in_order(text);
  BOOST_REQUIRE(j.size() == 80000u);
  int i = 0;
  for (auto it = j.begin(); it != j.end(); ++it, ++i) {
    BOOST_REQUIRE(it.key().front() == 'k');
    BOOST_REQUIRE(it.key().substr(1) == std::to_string(79999 - i));
    BOOST_REQUIRE(it.value().get<int>() == i);
  }
  text.back() = ',';
  text += "\"k5\":0}";
  BOOST_CHECK_THROW(parse_json_in_order(text), std::invalid_argument);
}

BOOST_AUTO_TEST_SUITE_END()
