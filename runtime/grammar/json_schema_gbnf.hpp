// JSON Schema (and "any JSON") turned into GBNF, for `response_format` / `structured_outputs.json`.
//
// The design follows llama.cpp's json-schema-to-grammar: every value rule ends with `space`, a
// bounded run of whitespace (so a model cannot emit whitespace forever), and object members come
// in the order of `properties`. Supported: type (one or a list), enum, const, properties,
// required, additionalProperties, items, prefixItems, minItems, maxItems, minLength, maxLength,
// pattern (ECMAScript, matched against the whole decoded string where JSON Schema would search
// in it; write ^...$ to say the same thing both ways), format (date, time, date-time,
// uuid; other formats are plain strings), anyOf, oneOf (as anyOf), allOf of one schema, $ref to
// #, #/$defs/X and #/definitions/X (recursion allowed), minimum / maximum / exclusiveMinimum /
// exclusiveMaximum on integers and numbers (draft 4's boolean exclusive flags too; exact decimal
// comparison, number_range_gbnf.hpp), {} and true (any value). Annotations are ignored. Anything
// else is refused with troupe::error(invalid_argument) "json schema: ... at /json/pointer", and so
// are combinations the grammar cannot intersect: $ref / anyOf / oneOf / allOf next to other
// validation keywords, pattern next to minLength / maxLength / a checked format.
//
// Departures from JSON Schema, by design: members only in `properties` order; no other keys
// unless additionalProperties allows them (absent counts as false, xgrammar's strict default,
// except with no properties at all: {"type": "object"} is any object), and then any key, a listed
// one included, may come after them;
// without `type`, the type is inferred from the keywords present (properties -> object, ...);
// integers are written without fraction or exponent; numbers have at most 16 integer and 16
// fraction digits, and bounded numbers no exponent (nor "-0"); strings in a pattern write `"`,
// `\` and controls escaped and other characters raw; oneOf does not refuse a value matching
// several branches; an enum or const value keeps its own member order (whitespace as anywhere
// else).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace troupe::grammar {

// A GBNF grammar whose `root` matches JSON text valid for the schema.
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema);

// A GBNF grammar whose `root` matches any JSON value, or any JSON object when object_only
// (OpenAI's response_format {"type": "json_object"}).
std::string json_value_gbnf(bool object_only);

}  // namespace troupe::grammar
