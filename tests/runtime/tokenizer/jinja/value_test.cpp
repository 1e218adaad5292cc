// Python semantics of template values: float repr, json.dumps as transformers' tojson, str and
// repr of containers, truthiness and equality across int/float/bool.
#define BOOST_TEST_MODULE troupe_jinja
#include <boost/test/unit_test.hpp>

#include "runtime/core/error.hpp"
#include "runtime/tokenizer/jinja/value.hpp"

using namespace troupe::jinja;
using ojson = nlohmann::ordered_json;

BOOST_AUTO_TEST_SUITE(value_semantics)

BOOST_AUTO_TEST_CASE(float_repr_matches_python) {
  BOOST_TEST(float_repr(1.0) == "1.0");
  BOOST_TEST(float_repr(0.1) == "0.1");
  BOOST_TEST(float_repr(-2.5) == "-2.5");
  BOOST_TEST(float_repr(1e-05) == "1e-05");
  BOOST_TEST(float_repr(0.0001) == "0.0001");
  BOOST_TEST(float_repr(1e16) == "1e+16");
  BOOST_TEST(float_repr(1234567890123456.0) == "1234567890123456.0");
  BOOST_TEST(float_repr(1.5e300) == "1.5e+300");
  BOOST_TEST(float_repr(123.456) == "123.456");
  BOOST_TEST(float_repr(-0.0) == "-0.0");
  BOOST_TEST(float_repr(0.30000000000000004) == "0.30000000000000004");
}

BOOST_AUTO_TEST_CASE(tojson_is_python_json_dumps) {
  ojson j = ojson::parse(R"({"b": 1, "a": [true, null, 2.0, "x\"y\\z\n\u0001", "Zürich"], "e": {}, "l": []})");
  value v = from_json(j);
  BOOST_TEST(to_json(v) == R"({"b": 1, "a": [true, null, 2.0, "x\"y\\z\n\u0001", "Zürich"], "e": {}, "l": []})");
  json_options ascii;
  ascii.ensure_ascii = true;
  BOOST_TEST(to_json(value("Zü😀"), ascii) == R"("Z\u00fc\ud83d\ude00")");
  json_options pretty;
  pretty.indent = 2;
  BOOST_TEST(to_json(from_json(ojson::parse(R"({"a": [1, 2], "b": {}})")), pretty) ==
             "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": {}\n}");
  json_options sorted;
  sorted.sort_keys = true;
  BOOST_TEST(to_json(from_json(ojson::parse(R"({"b": 1, "a": 2})")), sorted) == R"({"a": 2, "b": 1})");
  BOOST_CHECK_THROW(to_json(value(undefined{"x"})), troupe::error);
}

BOOST_AUTO_TEST_CASE(str_and_repr) {
  BOOST_TEST(to_str(value(none{})) == "None");
  BOOST_TEST(to_str(value(true)) == "True");
  BOOST_TEST(to_str(value(undefined{})) == "");
  BOOST_TEST(to_str(from_json(ojson::parse(R"([1, "a", {"k": "it's"}, null])"))) == R"([1, 'a', {'k': "it's"}, None])");
}

BOOST_AUTO_TEST_CASE(truthiness_and_equality) {
  BOOST_TEST(!truthy(value("")));
  BOOST_TEST(truthy(value(" ")));
  BOOST_TEST(!truthy(value::make_list()));
  BOOST_TEST(!truthy(value::make_dict()));
  BOOST_TEST(truthy(value::make_namespace()));
  BOOST_TEST(!truthy(value(0.0)));
  BOOST_TEST(equals(value(int64_t{1}), value(1.0)));
  BOOST_TEST(equals(value(true), value(int64_t{1})));
  BOOST_TEST(!equals(value("1"), value(int64_t{1})));
  BOOST_TEST(equals(from_json(ojson::parse(R"({"a": [1]})")), from_json(ojson::parse(R"({"a": [1.0]})"))));
  BOOST_TEST(less(value("a"), value("b")));
  BOOST_CHECK_THROW(less(value("a"), value(int64_t{1})), troupe::error);
}

BOOST_AUTO_TEST_SUITE_END()
