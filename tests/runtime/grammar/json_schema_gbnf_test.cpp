// json_schema_to_gbnf against the Python jsonschema package (labels in tests/data/json_schema/
// cases.json, from tools/reference/json_schema_cases.py), json_value_gbnf against
// nlohmann::json::accept, and the refusals of what is not supported.
#include <boost/test/unit_test.hpp>

#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/core/error.hpp"
#include "runtime/grammar/grammar.hpp"
#include "runtime/grammar/json_schema_gbnf.hpp"
#include "runtime/grammar/matcher.hpp"
#include "runtime/grammar/token_table.hpp"
#include "tests/runtime/grammar/accepts.hpp"

namespace g = troupe::grammar;
using ojson = nlohmann::ordered_json;

using troupe::grammar::test::accepts;

namespace {

std::shared_ptr<const g::grammar> compile(const std::string& gbnf) {
  return std::make_shared<const g::grammar>(g::parse_gbnf(gbnf));
}

ojson load_cases() {
  std::ifstream in(std::string(TROUPE_TEST_DATA_DIR) + "/json_schema/cases.json");
  BOOST_REQUIRE_MESSAGE(in, "cannot open tests/data/json_schema/cases.json");
  return ojson::parse(in);
}

// Every prefix of each text: mostly invalid JSON, sometimes valid (numbers), all in the grammar's
// whitespace style.
std::vector<std::string> with_prefixes(const std::vector<std::string>& texts) {
  std::vector<std::string> out;
  for (const std::string& t : texts)
    for (size_t n = 0; n <= t.size(); ++n) out.push_back(t.substr(0, n));
  return out;
}

void expect_refused(const std::string& schema_text, const std::vector<std::string>& needles) {
  BOOST_TEST_CONTEXT("schema " << schema_text) {
    try {
      const std::string out = g::json_schema_to_gbnf(ojson::parse(schema_text));
      BOOST_ERROR("accepted, gave\n" << out);
    } catch (const troupe::error& e) {
      const std::string msg = e.what();
      BOOST_TEST((e.code() == troupe::errc::invalid_argument));
      BOOST_TEST(msg.starts_with("json schema: "), msg);
      for (const std::string& n : needles) BOOST_TEST(msg.find(n) != std::string::npos, msg << " lacks " << n);
    }
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(json_schema_agrees_with_jsonschema) {
  const ojson data = load_cases();
  size_t instances = 0, cases = 0;
  for (const ojson& c : data.at("cases")) {
    BOOST_TEST_CONTEXT("case '" << c.at("name").get<std::string>() << "'") {
      const std::string gbnf = g::json_schema_to_gbnf(c.at("schema"));
      BOOST_TEST(gbnf == g::json_schema_to_gbnf(c.at("schema")));  // deterministic
      std::shared_ptr<const g::grammar> gr;
      BOOST_REQUIRE_NO_THROW(gr = compile(gbnf));
      size_t mismatches = 0;
      for (const ojson& inst : c.at("instances")) {
        const std::string text = inst.at("text");
        const bool valid = inst.at("valid");
        if (accepts(gr, text) != valid && ++mismatches <= 5)
          BOOST_ERROR("jsonschema says " << (valid ? "valid" : "invalid") << " for " << text << "\ngrammar:\n" << gbnf);
        ++instances;
      }
      ++cases;
    }
  }
  BOOST_TEST(cases >= 30);
  BOOST_TEST(instances >= 1000);
  BOOST_TEST_MESSAGE("checked " << instances << " instances of " << cases << " schemas");
}

BOOST_AUTO_TEST_CASE(json_value_agrees_with_nlohmann) {
  std::vector<std::string> texts = {
      "{}", "[]", "0", "-0", "12", "-12.5e+3", "1E9", "0.000001", "\"\"", "\"a\\u00e9\\/\\b\\f\\n\\r\\t\\\"\\\\\"",
      "\"é中🎉\"", "true", "false", "null", "{\"a\": [1, {\"b\": null}], \"c\": \"d\"}", "[1, 2, [3, [4]]]",
      "{\n  \"k\": [\n    true\n  ]\n}", "{\"\": {}}",
      // invalid
      "01", "-", "1.", ".5", "1e", "+1", "[1,]", "{\"a\":1,}", "[1 2]", "{\"a\"}", "{a:1}", "'s'", "\"\\x\"",
      "\"\\u12\"", "\"a\nb\"", "\"\t\"", "nul", "True", "[", "]", "{}}", "\"\xC0\x80\"", "\"\xED\xA0\x80\"",
      "\"\xFF\"", "\"\xE4\xB8\"", "NaN", "Infinity", "[-]", "{\"a\" 1}", "\"a\"\"b\"",
  };
  const ojson data = load_cases();
  for (const ojson& c : data.at("cases"))
    for (const ojson& inst : c.at("instances")) texts.push_back(inst.at("text"));
  const std::vector<std::string> corpus = with_prefixes(texts);
  const auto any = compile(g::json_value_gbnf(false));
  const auto object = compile(g::json_value_gbnf(true));
  size_t valid = 0, mismatches = 0;
  for (const std::string& t : corpus) {
    const bool ok = nlohmann::json::accept(t);
    const bool is_object = ok && nlohmann::json::parse(t).is_object();
    valid += ok;
    if (accepts(any, t) != ok && ++mismatches <= 10) BOOST_ERROR("any value: nlohmann says " << ok << " for " << t);
    if (accepts(object, t) != is_object && ++mismatches <= 10)
      BOOST_ERROR("object: nlohmann says " << is_object << " for " << t);
  }
  BOOST_TEST(valid > 500);
  BOOST_TEST(corpus.size() - valid > 5000);
  BOOST_TEST_MESSAGE("compared " << corpus.size() << " texts, " << valid << " valid");
}

BOOST_AUTO_TEST_CASE(json_whitespace_is_bounded) {
  const auto any = compile(g::json_value_gbnf(false));
  BOOST_TEST(accepts(any, "[1,\n" + std::string(20, ' ') + "2]"));
  BOOST_TEST(!accepts(any, "[1,\n" + std::string(21, ' ') + "2]"));
  BOOST_TEST(!accepts(any, "[1,  2]"));
  BOOST_TEST(!accepts(any, " 1"));  // no whitespace before the value
}

BOOST_AUTO_TEST_CASE(json_integer_ranges_are_exact) {
  // Every integer in a window against the arithmetic definition.
  for (const auto& [lo, hi] : std::vector<std::pair<int, int>>{{-37, 1234}, {0, 0}, {-5, -5}, {7, 70}, {-999, -100},
                                                                {100, 999}, {-1, 1}, {19, 2001}}) {
    ojson schema = {{"type", "integer"}, {"minimum", lo}, {"maximum", hi}};
    const auto gr = compile(g::json_schema_to_gbnf(schema));
    size_t wrong = 0;
    for (int x = -2100; x <= 2100; ++x)
      if (accepts(gr, std::to_string(x)) != (lo <= x && x <= hi) && ++wrong <= 3)
        BOOST_ERROR("[" << lo << ", " << hi << "]: " << x);
    BOOST_TEST(wrong == 0u);
  }
}

BOOST_AUTO_TEST_CASE(json_integer_bounds_draft4_exclusive_flags) {
  const auto gr = compile(g::json_schema_to_gbnf(ojson::parse(
      R"({"type": "integer", "minimum": 5, "exclusiveMinimum": true, "maximum": 10, "exclusiveMaximum": false})")));
  for (int x = -20; x <= 20; ++x) BOOST_TEST(accepts(gr, std::to_string(x)) == (x > 5 && x <= 10), x);
}

BOOST_AUTO_TEST_CASE(json_number_bounds_draft4_flags_and_strictest_bound) {
  // Draft 4's boolean flags; of two lower bounds the stricter counts (exclusiveMinimum 0.5 over
  // minimum 0.25); bounded numbers are plain decimals, so an exponent is not written.
  const auto gr = compile(g::json_schema_to_gbnf(ojson::parse(
      R"({"type": "number", "minimum": 0.25, "exclusiveMinimum": 0.5, "maximum": 2, "exclusiveMaximum": false})")));
  for (const char* t : {"0.51", "1", "2", "1.999", "0.5000000000000001"}) BOOST_TEST(accepts(gr, t), t);
  for (const char* t : {"0.5", "0.3", "0.25", "2.0000001", "-1", "1e0", "1.5E0"}) BOOST_TEST(!accepts(gr, t), t);
  const auto d4 = compile(g::json_schema_to_gbnf(
      ojson::parse(R"({"type": "number", "minimum": -1, "exclusiveMinimum": true, "maximum": 1, "exclusiveMaximum": true})")));
  for (const char* t : {"-0.9999", "0", "0.5"}) BOOST_TEST(accepts(d4, t), t);
  for (const char* t : {"-1", "1", "-0", "1.0"}) BOOST_TEST(!accepts(d4, t), t);
  // JSON text cannot spell an infinite bound (nlohmann refuses 1e999), a schema built in code can.
  const ojson inf = {{"type", "number"}, {"maximum", std::numeric_limits<double>::infinity()}};
  try {
    g::json_schema_to_gbnf(inf);
    BOOST_ERROR("an infinite maximum was accepted");
  } catch (const troupe::error& e) {
    BOOST_TEST(std::string(e.what()).find("'maximum' must be a finite number at /maximum") != std::string::npos, e.what());
  }
}

BOOST_AUTO_TEST_CASE(json_schema_refusals_name_keyword_and_path) {
  expect_refused(R"({"not": {}})", {"unsupported keyword 'not'", "at /not"});
  expect_refused(R"({"type": "object", "properties": {"a": {"type": "string", "if": {}}}})",
                 {"'if'", "at /properties/a/if"});
  expect_refused(R"({"type": "object", "patternProperties": {"^x": {}}})", {"'patternProperties'", "/patternProperties"});
  expect_refused(R"({"type": "number", "multipleOf": 2})", {"'multipleOf'", "/multipleOf"});
  expect_refused(R"({"type": "number", "minimum": "0"})", {"'minimum' must be a number", "at /minimum"});
  expect_refused(R"({"type": "number", "minimum": 1.5, "exclusiveMaximum": 1.5})", {"no number"});
  expect_refused(R"({"type": "number", "exclusiveMinimum": true})", {"'exclusiveMinimum': true needs 'minimum'"});
  expect_refused(R"({"type": "array", "uniqueItems": true})", {"'uniqueItems'", "/uniqueItems"});
  expect_refused(R"({"type": "object", "required": 3})", {"'required'", "at /required"});
  expect_refused(R"({"type": "object", "required": ["zz"], "properties": {}})", {"'zz'", "at /required"});
  expect_refused(R"({"type": 3})", {"'type'", "at /type"});
  expect_refused(R"({"type": "object", "properties": {"x": {"type": "strin"}}})", {"'strin'", "at /properties/x/type"});
  expect_refused(R"({"properties": []})", {"'properties'", "at /properties"});
  expect_refused(R"({"$ref": "#/foo"})", {"#/foo", "at /$ref"});
  expect_refused(R"({"$ref": "#/$defs/missing", "$defs": {}})", {"missing", "at /$ref"});
  expect_refused(R"({"allOf": [{}, {}]})", {"'allOf'", "at /allOf"});
  expect_refused(R"({"type": "string", "minLength": -1})", {"'minLength'", "at /minLength"});
  expect_refused(R"({"type": "string", "maxLength": 5000})", {"'maxLength'", "at /maxLength"});
  expect_refused(R"({"type": "string", "pattern": "(a"})", {"regex", "offset 0", "at /pattern"});
  expect_refused(R"({"type": "string", "pattern": 5})", {"'pattern'", "at /pattern"});
  expect_refused(R"({"anyOf": [{"type": "string"}], "type": "string"})", {"'type'", "'anyOf'", "at /type"});
  expect_refused(R"({"type": "array", "items": [{}]})", {"'items'", "at /items"});
  expect_refused(R"({"properties": {"a/b~": {"not": {}}}})", {"'not'", "at /properties/a~1b~0/not"});
  expect_refused(R"({"anyOf": [{"type": "integer"}, {"const": 1, "contains": {}}]})", {"'contains'", "at /anyOf/1/contains"});
  expect_refused(R"({"$defs": {"a": {"dependentRequired": {}}}, "$ref": "#/$defs/a"})",
                 {"'dependentRequired'", "at /$defs/a/dependentRequired"});
  expect_refused(R"(false)", {"false"});
  expect_refused(R"(3)", {"must be an object or a boolean"});
  expect_refused(R"({"type": "integer", "minimum": 5, "maximum": 4})", {"no integer"});
  expect_refused(R"({"enum": []})", {"'enum'", "at /enum"});
  expect_refused(R"({"type": "string", "enum": [1, 2]})", {"no value"});
  expect_refused(R"({"type": "array", "prefixItems": [{}], "items": false, "minItems": 2})", {"'minItems'", "/minItems"});
  expect_refused(R"({"type": "object", "additionalProperties": 1})", {"'additionalProperties'", "/additionalProperties"});
}

BOOST_AUTO_TEST_CASE(json_schema_output_is_bounded) {
  ojson many = ojson::array();
  for (int i = 0; i < 3000; ++i) many.push_back(std::string(400, 'a') + std::to_string(i));
  expect_refused(ojson{{"enum", many}}.dump(), {"over"});
}

BOOST_AUTO_TEST_CASE(json_schema_annotations_are_ignored) {
  const ojson plain = ojson::parse(R"({"type": "object", "properties": {"a": {"type": "string"}}})");
  const ojson annotated = ojson::parse(R"({"type": "object", "title": "T", "description": "d", "$schema": "x",
    "$id": "y", "$comment": "c", "default": {}, "examples": [{}], "deprecated": false, "readOnly": false,
    "writeOnly": false, "properties": {"a": {"type": "string", "description": "a"}}})");
  BOOST_TEST(g::json_schema_to_gbnf(plain) == g::json_schema_to_gbnf(annotated));
}
