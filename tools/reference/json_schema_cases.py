#!/usr/bin/env python3
"""Reference data for the JSON Schema -> GBNF converter, labelled by the `jsonschema` package.

Writes tests/data/json_schema/cases.json: a list of {"name", "schema", "instances": [{"text", "valid"}]}
where `valid` is what jsonschema (Draft 2020-12, with a format checker for date, time, date-time and
uuid) says of the JSON text. tests/runtime/grammar/json_schema_gbnf_test.cpp checks that the grammar
from json_schema_to_gbnf accepts a text exactly when it is valid.

Not a dependency of Troupe: a test-data script. Needs jsonschema and rfc3339-validator from PyPI:
  pip install --user jsonschema rfc3339-validator
  python3 tools/reference/json_schema_cases.py

Candidates the grammar cannot accept by design are not generated (json_schema_gbnf.hpp):
  - object members in another order than `properties`, or keys not in `properties` where the schema
    lists properties and has no additionalProperties (the converter then treats absent as false,
    jsonschema as true; with no properties at all both take any key);
  - whitespace other than the grammar's `space` (texts are json.dumps compact, default and indent=2);
  - integers written with a fraction ("1.0"), numbers over 16 integer / fraction digits;
  - an extra key (allowed by additionalProperties) that is also a listed property, with a value
    that is invalid for the property: the grammar takes any key as an extra key;
  - values of another type than the one inferred for a schema without `type`;
  - oneOf instances matching several branches (oneOf is converted as anyOf);
  - strings a pattern applies to written with \\uXXXX escapes for ordinary characters (json.dumps
    with ensure_ascii=False writes them raw), ending in a newline (Python's `$` matches before one)
    or using characters where Python's re and ECMAScript differ (Unicode \\d \\w \\s, `.` on \\r);
  - dates the grammar cannot check (day 31 of a 30-day month, February 30, year 0000).
"""
import importlib.metadata
import json
import os
import random
import sys

from jsonschema import Draft202012Validator, FormatChecker

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "data", "json_schema", "cases.json")

# Values offered to every schema: mostly of the wrong type, so each case has invalid instances.
GENERIC = [None, True, False, 0, 7, -3, 2.5, "", "x", [], [1], {}]

STR = {"type": "string"}
INT = {"type": "integer"}


class Raw(str):
    """A candidate given as text, for texts that are not JSON at all (invalid by definition)."""


def case(name, schema, candidates, generic=True):
    return {"name": name, "schema": schema, "candidates": list(candidates) + (GENERIC if generic else [])}


def integers(lo, hi, rng):
    """Integers around the bounds and digit-length changes, and a seeded sample."""
    points = {0, 1, -1, 9, 10, 99, 100, 999, 1000, -9, -10, -99, -100, 10**15, -(10**15), 9999999999999999}
    for b in (lo, hi):
        if b is not None:
            points.update(b + d for d in range(-3, 4))
    points.update(rng.randint(-2000, 2000) for _ in range(40))
    return sorted(points)


def build_cases():
    rng = random.Random(20240601)
    cases = []
    not_json = [Raw(t) for t in ('{"a":1,}', "01", "[1 2]", '"abc', "nul", "-", "1.", ".5", "1e", '{"a"}', "[", "+1",
                                  '"\\x"', "'s'", '{"a":1}}')]
    cases.append(case("any value (empty schema)", {}, [{"a": [1, {"b": None}]}, "s", 1e-05, [[]]] + not_json))
    cases.append(case("true schema", True, [{"k": "v"}, [1, 2], "z", Raw("[1,]"), Raw("tru")]))
    cases.append(case("string", STR, ["hello", "quote\"back\\slash", "tab\tnew\nline", "\u0001ctrl", "é ü 中文 🎉", "/"]))
    cases.append(case("number", {"type": "number", "title": "ignored", "description": "ignored"},
                      [0.5, -0.25, 3, -12, 1e-07, 6.02e-23, 123456789.125, "1"]))
    cases.append(case("integer", {"type": "integer", "$comment": "ignored"}, [42, -42, 1234567890123, "3", 3.5]))
    cases.append(case("boolean and null", {"type": ["boolean", "null"]}, [True, False, None, "true", 0]))
    cases.append(case("type list string|integer", {"type": ["string", "integer"], "minLength": 2, "minimum": 0},
                      ["ab", "a", 0, 5, -5, 2.5]))
    cases.append(case("enum", {"enum": ["red", "green", 3, None, [1, 2], {"a": 1}, "q\"uote"]},
                      ["red", "green", "blue", 3, 4, None, [1, 2], [2, 1], {"a": 1}, {"a": 2}, "q\"uote"]))
    cases.append(case("enum with type filter", {"type": "string", "enum": ["a", 1, "b"]}, ["a", "b", 1, "c"]))
    cases.append(case("const", {"const": {"x": [True, None]}}, [{"x": [True, None]}, {"x": [False, None]}, {"x": []}]))
    cases.append(case("string length", {"type": "string", "minLength": 2, "maxLength": 4},
                      ["", "a", "ab", "abc", "abcd", "abcde", "é中", "\n\t", "a\"", "🎉🎉🎉🎉🎉"]))
    cases.append(case("string min only", {"type": "string", "minLength": 3}, ["ab", "abc", "abcdefgh"]))
    cases.append(case("pattern phone", {"type": "string", "pattern": "^\\d{3}-\\d{4}$"},
                      ["555-1234", "5551234", "55-1234", "555-12345", "abc-defg", "555-123"]))
    cases.append(case("pattern alternation and classes", {"type": "string", "pattern": "^(foo|ba[rz])+(\\.[a-c]{1,2})?$"},
                      ["foo", "bar", "baz", "foobar", "bax", "foo.a", "foo.abc", "foo.", ".a", "bazfoo.cb"]))
    cases.append(case("pattern with quote, backslash and newline",
                      {"type": "string", "pattern": "^a[\"\\\\]+b\\n?$"},
                      ["a\"b", "a\\b", "a\"\\\"b", "ab", "a\"b\n", "a\"bb", "a'b"]))
    cases.append(case("pattern negated class", {"type": "string", "pattern": "^[^0-9\"]*$"},
                      ["abc", "a1", "", "tab\there", "q\"", "é中"]))
    cases.append(case("pattern dot", {"type": "string", "pattern": "^x.{2}y$"}, ["xaby", "x\"\\y", "xay", "xé中y", "x\tay"]))
    cases.append(case("format date", {"type": "string", "format": "date"},
                      ["2024-02-29", "1999-12-31", "2024-13-01", "2024-1-01", "2024-00-10", "2024-04-00", "24-04-01",
                       "2024-04-01T00:00:00Z", "abcd-ef-gh"]))
    cases.append(case("format time", {"type": "string", "format": "time"},
                      ["12:34:56Z", "23:59:59.123+05:30", "00:00:00z", "24:00:00Z", "12:60:00Z", "12:34:56",
                       "12:34Z", "12:34:56-08:00", "12:34:56+24:00"]))
    cases.append(case("format date-time", {"type": "string", "format": "date-time"},
                      ["2024-06-01T12:00:00Z", "2024-06-01t12:00:00.5-01:00", "2024-06-01 12:00:00Z",
                       "2024-06-01T12:00:00", "2024-06-01", "2024-06-01T25:00:00Z"]))
    cases.append(case("format uuid", {"type": "string", "format": "uuid"},
                      ["123e4567-e89b-12d3-a456-426614174000", "123E4567-E89B-12D3-A456-426614174000",
                       "123e4567e89b12d3a456426614174000", "123e4567-e89b-12d3-a456-42661417400",
                       "123e4567-e89b-12d3-a456-42661417400g"]))
    cases.append(case("format unknown is a plain string", {"type": "string", "format": "email"}, ["not an email", "a@b.c"]))
    person = {
        "type": "object",
        "properties": {
            "name": STR,
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
            "email": STR,
            "tags": {"type": "array", "items": STR},
        },
        "required": ["name", "age"],
    }
    cases.append(case("object required and optional", person, [
        {"name": "Ann", "age": 30},
        {"name": "Ann", "age": 30, "email": "a@x"},
        {"name": "Ann", "age": 30, "tags": ["a", "b"]},
        {"name": "Ann", "age": 30, "email": "a@x", "tags": []},
        {"name": "Ann"},
        {"age": 30},
        {"name": "Ann", "age": 151},
        {"name": "Ann", "age": -1},
        {"name": 5, "age": 30},
        {"name": "Ann", "age": 30, "tags": [1]},
    ]))
    optional_first = {
        "type": "object",
        "properties": {"a": INT, "b": INT, "c": INT, "d": INT},
        "required": ["c"],
    }
    cases.append(case("optional members before a required one", optional_first, [
        {"c": 1}, {"a": 1, "c": 1}, {"b": 1, "c": 1}, {"a": 1, "b": 2, "c": 3}, {"a": 1, "b": 2, "c": 3, "d": 4},
        {"c": 1, "d": 2}, {"a": 1}, {"a": 1, "b": 2}, {"a": 1, "b": 2, "d": 4}, {"a": "x", "c": 1},
    ]))
    all_optional = {"type": "object", "properties": {"x": STR, "y": {"type": "boolean"}, "z": {"type": "null"}},
                    "additionalProperties": False}
    cases.append(case("all members optional, no others", all_optional, [
        {}, {"x": "a"}, {"y": True}, {"z": None}, {"x": "a", "z": None}, {"x": "a", "y": False, "z": None},
        {"x": 1}, {"w": 1}, {"x": "a", "w": 1},
    ]))
    cases.append(case("additionalProperties schema", {
        "type": "object", "properties": {"id": INT}, "required": ["id"], "additionalProperties": {"type": "number"}}, [
        {"id": 1}, {"id": 1, "score": 2.5}, {"id": 1, "a": 1, "b": -2}, {"id": 1, "a": "s"}, {"score": 1},
    ]))
    cases.append(case("additionalProperties true, all optional", {
        "type": "object", "properties": {"p": {"type": "boolean"}}, "additionalProperties": True}, [
        {}, {"p": True}, {"q": [1, {"r": None}]}, {"p": False, "q": "x", "s": {}}, {"q": 1, "p": True},
    ]))
    cases.append(case("object without properties", {"type": "object"},
                      [{}, {"a": 1}, {"x": [1, {"y": None}], "z": "s"}]))
    cases.append(case("object without type (inferred)", {"properties": {"k": STR}, "required": ["k"]},
                      [{"k": "v"}, {"k": 1}, {}], generic=False))
    cases.append(case("keys needing escapes", {
        "type": "object", "properties": {"quo\"te": INT, "sla/sh": INT, "ünï中": INT}, "required": ["quo\"te"]}, [
        {"quo\"te": 1}, {"quo\"te": 1, "sla/sh": 2, "ünï中": 3}, {"quo\"te": 1, "ünï中": "x"}, {"sla/sh": 2},
    ]))
    cases.append(case("nested objects", {
        "type": "object",
        "properties": {"user": {"type": "object", "properties": {"id": INT, "addr": {
            "type": "object", "properties": {"city": STR, "zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
            "required": ["city"]}}, "required": ["id", "addr"]}},
        "required": ["user"]}, [
        {"user": {"id": 1, "addr": {"city": "Oslo"}}},
        {"user": {"id": 1, "addr": {"city": "Oslo", "zip": "01234"}}},
        {"user": {"id": 1, "addr": {"city": "Oslo", "zip": "1234"}}},
        {"user": {"id": 1, "addr": {}}},
        {"user": {"id": 1}},
        {"user": {"id": "1", "addr": {"city": "Oslo"}}},
    ]))
    cases.append(case("array items and bounds", {"type": "array", "items": INT, "minItems": 2, "maxItems": 4}, [
        [], [1], [1, 2], [1, 2, 3], [1, 2, 3, 4], [1, 2, 3, 4, 5], [1, "2"], [[1], [2]],
    ]))
    cases.append(case("array without items schema", {"type": "array", "maxItems": 2}, [[], [None], [{"a": 1}, "x"], [1, 2, 3]]))
    cases.append(case("prefixItems then items", {
        "type": "array", "prefixItems": [STR, INT], "items": {"type": "boolean"}}, [
        [], ["a"], ["a", 1], ["a", 1, True, False], ["a", "b"], [1], ["a", 1, 2], ["a", 1, True, None],
    ]))
    cases.append(case("prefixItems closed, minItems", {
        "type": "array", "prefixItems": [INT, INT, INT], "items": False, "minItems": 2}, [
        [1], [1, 2], [1, 2, 3], [1, 2, 3, 4], [1, "a"], [],
    ]))
    cases.append(case("prefixItems with maxItems below", {
        "type": "array", "prefixItems": [INT, STR, INT], "maxItems": 2}, [[], [1], [1, "a"], [1, "a", 2], ["a"]]))
    cases.append(case("anyOf", {"anyOf": [STR, {"type": "array", "items": INT, "maxItems": 2}, {"type": "null"}],
                                "description": "ignored"}, [
        "s", [], [1, 2], [1, 2, 3], None, 1, ["a"],
    ]))
    cases.append(case("oneOf disjoint branches", {"oneOf": [
        {"type": "object", "properties": {"kind": {"const": "circle"}, "r": {"type": "number"}}, "required": ["kind", "r"]},
        {"type": "object", "properties": {"kind": {"const": "square"}, "side": {"type": "number"}},
         "required": ["kind", "side"]}]}, [
        {"kind": "circle", "r": 1.5}, {"kind": "square", "side": 2}, {"kind": "circle", "side": 2},
        {"kind": "triangle", "r": 1}, {"kind": "circle"},
    ]))
    cases.append(case("allOf with one schema", {"allOf": [{"type": "integer", "minimum": 10}], "title": "t"},
                      [10, 11, 9, -10, "10"]))
    cases.append(case("$ref to $defs", {
        "$defs": {"point": {"type": "object", "properties": {"x": INT, "y": INT}, "required": ["x", "y"]}},
        "type": "object", "properties": {"from": {"$ref": "#/$defs/point"}, "to": {"$ref": "#/$defs/point"}},
        "required": ["from", "to"]}, [
        {"from": {"x": 1, "y": 2}, "to": {"x": 3, "y": 4}}, {"from": {"x": 1}, "to": {"x": 3, "y": 4}},
        {"from": {"x": 1, "y": 2}},
    ]))
    cases.append(case("recursive $ref (tree)", {
        "$defs": {"node": {"type": "object", "properties": {
            "value": INT, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["value"]}},
        "$ref": "#/$defs/node"}, [
        {"value": 1}, {"value": 1, "children": []}, {"value": 1, "children": [{"value": 2, "children": [{"value": 3}]}]},
        {"value": 1, "children": [{"children": []}]}, {"value": 1, "children": [{"value": "x"}]},
    ]))
    cases.append(case("recursive definitions (linked list)", {
        "definitions": {"list": {"anyOf": [{"type": "null"}, {"type": "object", "properties": {
            "head": INT, "tail": {"$ref": "#/definitions/list"}}, "required": ["head", "tail"]}]}},
        "$ref": "#/definitions/list"}, [
        None, {"head": 1, "tail": None}, {"head": 1, "tail": {"head": 2, "tail": None}},
        {"head": 1, "tail": {"head": 2}}, {"head": 1},
    ]))
    cases.append(case("recursive $ref to the root", {
        "type": "object", "properties": {"name": STR, "next": {"$ref": "#"}}, "required": ["name"]}, [
        {"name": "a"}, {"name": "a", "next": {"name": "b", "next": {"name": "c"}}}, {"name": "a", "next": {}},
        {"name": "a", "next": None},
    ]))
    cases.append(case("integer range", {"type": "integer", "minimum": -37, "maximum": 1234},
                      integers(-37, 1234, rng)))
    cases.append(case("integer exclusive range", {"type": "integer", "exclusiveMinimum": 5, "exclusiveMaximum": 120.5},
                      integers(5, 120, rng)))
    cases.append(case("integer negative range", {"type": "integer", "minimum": -1005, "maximum": -98},
                      integers(-1005, -98, rng)))
    cases.append(case("integer minimum only", {"type": "integer", "minimum": 17}, integers(17, None, rng)))
    cases.append(case("integer maximum only", {"type": "integer", "maximum": -250}, integers(None, -250, rng)))
    cases.append(case("integer fractional bounds", {"type": "integer", "minimum": 0.5, "maximum": 99.5},
                      integers(0, 100, rng)))
    # Bounded numbers: the grammar writes them without an exponent, so no candidate needs one.
    cases.append(case("number range", {"type": "number", "minimum": -2.5, "maximum": 10.25},
                      [-2.6, -2.5, -2.49, -1, 0, 0.001, 3.75, 10, 10.25, 10.26, 10.2500001, 11, -3, 100.5, -0.125]))
    cases.append(case("number exclusive bounds", {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
                      [0, 0.0001, 0.5, 0.9999, 1, -0.5, 1.5, 0.999999999999]))
    cases.append(case("number minimum only, no type", {"minimum": 0.1},
                      [0.1, 0.09999, 0.11, 5, -1, 12345.678, 0, 0.1000001], generic=False))
    cases.append(case("number negative maximum", {"type": "number", "maximum": -0.5},
                      [-0.5, -0.49, -0.51, -100.25, 0, 3, -1]))
    return cases


def has_integral_float(v):
    if isinstance(v, float):
        return v.is_integer()
    if isinstance(v, list):
        return any(has_integral_float(x) for x in v)
    if isinstance(v, dict):
        return any(has_integral_float(x) for x in v.values())
    return False


def texts(v):
    """The grammar's accepted whitespace styles: compact, json.dumps' default, indent=2."""
    if isinstance(v, Raw):
        return [str(v)]
    out = [json.dumps(v, ensure_ascii=False, separators=(",", ":"))]
    for t in (json.dumps(v, ensure_ascii=False), json.dumps(v, ensure_ascii=False, indent=2)):
        if t not in out and isinstance(v, (dict, list)):
            out.append(t)
    return out


def main():
    # Draft 2020-12's own checkers (FormatChecker(formats=...) would pick draft 3's "time"), only
    # for the formats the converter enforces: the others are plain strings there.
    base = Draft202012Validator.FORMAT_CHECKER
    checker = FormatChecker(formats=())
    checker.checkers = {f: base.checkers[f] for f in ("date", "time", "date-time", "uuid")}
    result = []
    for c in build_cases():
        validator = Draft202012Validator(c["schema"], format_checker=checker)
        Draft202012Validator.check_schema(c["schema"])
        instances, seen = [], set()
        for v in c["candidates"]:
            if not isinstance(v, Raw) and has_integral_float(v):
                continue
            for t in texts(v):
                if t in seen:
                    continue
                seen.add(t)
                try:
                    value = json.loads(t)
                except ValueError:
                    instances.append({"text": t, "valid": False})
                    continue
                instances.append({"text": t, "valid": validator.is_valid(value)})
        n_valid = sum(i["valid"] for i in instances)
        if n_valid == 0 or n_valid == len(instances):
            sys.exit(f"case {c['name']!r} needs both valid and invalid instances")
        result.append({"name": c["name"], "schema": c["schema"], "instances": instances})
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump({"generator": "tools/reference/json_schema_cases.py",
                   "jsonschema": importlib.metadata.version("jsonschema"),
                   "cases": result}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    total = sum(len(c["instances"]) for c in result)
    print(f"wrote {OUT}: {len(result)} cases, {total} instances, {os.path.getsize(OUT)} bytes")


if __name__ == "__main__":
    main()
