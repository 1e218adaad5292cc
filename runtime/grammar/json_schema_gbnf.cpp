// json_schema_to_gbnf: one walk over the schema. Each schema gives a GBNF expression; objects,
// arrays, alternatives and members become named rules (named after where they are, e.g.
// root-address-city), $defs become rules named after the definition (so recursion is a rule
// calling itself), and the shared pieces (string, number, space, ...) are written once at the end.
#include "runtime/grammar/json_schema_gbnf.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "runtime/core/error.hpp"
#include "runtime/grammar/grammar.hpp"
#include "runtime/grammar/gbnf_text.hpp"
#include "runtime/grammar/number_range_gbnf.hpp"
#include "runtime/grammar/regex_gbnf.hpp"

namespace troupe::grammar {

namespace {

using json = nlohmann::ordered_json;

constexpr int kMaxDepth = 64;                       // schema nesting, so recursion stays shallow
constexpr uint32_t kInf = UINT32_MAX;

struct primitive {
  const char* name;
  const char* body;
  std::vector<const char*> uses;
};

// The shared rules, in the order they are written.
const std::vector<primitive>& primitives() {
  static const std::vector<primitive> list = {
      {"value", "object | array | string | number | boolean | null",
       {"object", "array", "string", "number", "boolean", "null"}},
      {"object", R"("{" space ( string ":" space value ( "," space string ":" space value )* )? "}" space)",
       {"string", "value", "space"}},
      {"array", R"("[" space ( value ( "," space value )* )? "]" space)", {"value", "space"}},
      {"string", R"("\"" char* "\"" space)", {"char", "space"}},
      // Any code point but `"`, `\` and controls, or an escape.
      {"char", R"([^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ))", {}},
      // Digit counts are bounded (as in llama.cpp): past double precision a model is looping.
      {"number", R"("-"? integral-part ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,3} )? space)",
       {"integral-part", "space"}},
      {"integer", R"("-"? integral-part space)", {"integral-part", "space"}},
      {"integral-part", R"("0" | [1-9] [0-9]{0,15})", {}},
      {"boolean", R"(( "true" | "false" ) space)", {"space"}},
      {"null", R"("null" space)", {"space"}},
      // RFC 3339 (what JSON Schema's formats refer to); day counts per month are not checked.
      {"date", R"([0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] ))", {}},
      {"time",
       R"(( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]+ )? ( [Zz] | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ))",
       {}},
      {"date-time", R"(date [Tt] time)", {"date", "time"}},
      {"uuid", R"([0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12})", {}},
      // Whitespace between tokens, bounded so that a model cannot emit it forever.
      {"space", R"(| " " | "\n" [ \t]{0,20})", {}},
  };
  return list;
}

const std::set<std::string, std::less<>> kAnnotations = {
    "title", "description", "default", "examples", "$schema", "$id", "$comment", "deprecated", "readOnly", "writeOnly"};
const std::set<std::string, std::less<>> kSupported = {
    "type", "enum", "const", "properties", "required", "additionalProperties", "items", "prefixItems",
    "minItems", "maxItems", "minLength", "maxLength", "pattern", "format", "anyOf", "oneOf", "allOf",
    "$ref", "$defs", "definitions", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
const std::vector<std::string> kTypes = {"null", "boolean", "object", "array", "number", "integer", "string"};
const std::vector<std::string> kBounds = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
const std::set<std::string, std::less<>> kFormats = {"date", "time", "date-time", "uuid"};

[[noreturn]] void fail(const std::string& what, const std::string& path) {
  throw_error(errc::invalid_argument, "json schema: " + what + " at " + (path.empty() ? "/" : path));
}

// A JSON pointer token: ~ and / escaped.
std::string pointer_token(std::string_view key) {
  std::string out;
  for (char c : key) out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
  return out;
}

std::string child(const std::string& path, std::string_view key) { return path + "/" + pointer_token(key); }

// x repeated m to n times (n kInf: unbounded); "" when it may not appear at all.
std::string repetition(const std::string& x, uint32_t m, uint32_t n) {
  if (n == 0) return "";
  if (n == kInf) return x + (m == 0 ? "*" : m == 1 ? "+" : "{" + std::to_string(m) + ",}");
  if (m == 0 && n == 1) return x + "?";
  if (m == n) return m == 1 ? x : x + "{" + std::to_string(m) + "}";
  return x + "{" + std::to_string(m) + "," + std::to_string(n) + "}";
}

bool is_type(const json& v, std::string_view t) {
  if (t == "null") return v.is_null();
  if (t == "boolean") return v.is_boolean();
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  if (t == "string") return v.is_string();
  if (t == "number") return v.is_number();
  if (t == "integer")
    return v.is_number_integer() || (v.is_number_float() && std::trunc(v.get<double>()) == v.get<double>());
  return false;
}

class converter {
 public:
  explicit converter(const json& root) : root_(root) {
    for (const primitive& p : primitives()) taken_.insert(p.name);
    taken_.insert("root");
  }

  std::string schema() {
    rules_.push_back({"root", ""});
    rules_[0].second = body(root_, "", "root", 0);
    return assemble();
  }

  std::string any_value(bool object_only) {
    rules_.push_back({"root", use(object_only ? "object" : "value")});
    return assemble();
  }

 private:
  // Marks a shared rule (and what it uses) to be written; returns its name.
  std::string use(const std::string& name) {
    if (!used_.insert(name).second) return name;
    for (const primitive& p : primitives())
      if (name == p.name)
        for (const char* u : p.uses) use(u);
    return name;
  }

  std::string unique_name(const std::string& hint) {
    std::string base;
    for (char c : hint) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
      const char out = ok ? c : '-';
      // No runs of - (readability) and no "__" (the GBNF parser's generated names use it).
      if (!ok && !base.empty() && base.back() == '-') continue;
      base += out;
    }
    while (!base.empty() && base.back() == '-') base.pop_back();
    if (base.empty() || base.front() == '-') base = "r" + base;
    std::string name = base;
    for (int n = 2; !taken_.insert(name).second; ++n) name = base + "-" + std::to_string(n);
    return name;
  }

  std::string add_rule(const std::string& hint, std::string body) {
    const std::string name = unique_name(hint);
    bytes_ += name.size() + body.size() + 6;
    if (bytes_ > kMaxGrammarBytes)
      fail("the grammar would be over " + std::to_string(kMaxGrammarBytes) + " bytes", "");
    rules_.push_back({name, std::move(body)});
    return name;
  }

  static bool is_name(const std::string& s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
    });
  }

  // An expression that can stand in a sequence: a rule name, a new rule named after `hint`.
  std::string ref(const json& s, const std::string& path, const std::string& hint, int depth) {
    std::string b = body(s, path, hint, depth);
    return is_name(b) ? b : add_rule(hint, std::move(b));
  }

  // The alternatives matching the schema (may contain a top-level `|`).
  std::string body(const json& s, const std::string& path, const std::string& hint, int depth) {
    if (depth > kMaxDepth) fail("the schema nests deeper than " + std::to_string(kMaxDepth), path);
    if (s.is_boolean()) {
      if (s.get<bool>()) return use("value");
      fail("the schema false matches nothing", path);
    }
    if (!s.is_object()) fail("a schema must be an object or a boolean", path);
    for (const auto& [key, v] : s.items())
      if (!kAnnotations.contains(key) && !kSupported.contains(key))
        fail("unsupported keyword '" + key + "'", child(path, key));

    for (const char* comb : {"$ref", "anyOf", "oneOf", "allOf"}) {
      if (!s.contains(comb)) continue;
      for (const auto& [key, v] : s.items())
        if (!kAnnotations.contains(key) && key != comb && key != "$defs" && key != "definitions")
          fail("unsupported keyword '" + key + "' next to '" + comb + "'", child(path, key));
      return combinator(s, comb, path, hint, depth);
    }
    if (s.contains("enum") || s.contains("const")) return enumeration(s, path);
    const std::vector<std::string> types = types_of(s, path);
    std::vector<std::string> alts;
    for (const std::string& t : types) alts.push_back(typed(s, t, path, hint, depth));
    return join(alts, " | ");
  }

  std::string combinator(const json& s, const std::string& comb, const std::string& path, const std::string& hint,
                         int depth) {
    const json& v = s.at(comb);
    const std::string at = child(path, comb);
    if (comb == "$ref") return definition(v, at, depth);
    if (!v.is_array() || v.empty()) fail("'" + comb + "' must be a non-empty array of schemas", at);
    if (comb == "allOf") {
      if (v.size() != 1) fail("unsupported keyword 'allOf' with more than one schema", at);
      return body(v[0], child(at, "0"), hint, depth + 1);
    }
    std::vector<std::string> alts;
    for (size_t i = 0; i < v.size(); ++i)
      alts.push_back(ref(v[i], child(at, std::to_string(i)), hint + "-" + std::to_string(i), depth + 1));
    return join(alts, " | ");
  }

  // $ref: "#" or "#/$defs/NAME" / "#/definitions/NAME"; each definition is one rule.
  std::string definition(const json& v, const std::string& at, int depth) {
    if (!v.is_string()) fail("'$ref' must be a string", at);
    const std::string r = v.get<std::string>();
    if (r == "#") return "root";
    if (auto it = defs_.find(r); it != defs_.end()) return it->second;
    std::string container, token;
    for (const char* c : {"$defs", "definitions"}) {
      const std::string prefix = std::string("#/") + c + "/";
      if (r.starts_with(prefix)) container = c, token = r.substr(prefix.size());
    }
    if (container.empty() || token.find('/') != std::string::npos)
      fail("unsupported $ref '" + r + "' (only #, #/$defs/NAME and #/definitions/NAME)", at);
    std::string key;
    for (size_t i = 0; i < token.size(); ++i) {
      if (token[i] == '~' && i + 1 < token.size() && (token[i + 1] == '0' || token[i + 1] == '1')) {
        key += token[++i] == '0' ? '~' : '/';
      } else {
        key += token[i];
      }
    }
    if (!root_.is_object() || !root_.contains(container) || !root_.at(container).is_object() ||
        !root_.at(container).contains(key))
      fail("$ref '" + r + "' names no definition", at);
    // The name is taken before the body is built, so a definition can refer to itself.
    const std::string name = unique_name(key);
    defs_[r] = name;
    const size_t slot = rules_.size();
    rules_.push_back({name, ""});
    rules_[slot].second = body(root_.at(container).at(key), child(child("", container), key), name, depth + 1);
    return name;
  }

  std::string enumeration(const json& s, const std::string& path) {
    std::vector<json> values;
    if (s.contains("enum")) {
      const json& e = s.at("enum");
      if (!e.is_array() || e.empty()) fail("'enum' must be a non-empty array", child(path, "enum"));
      values.assign(e.begin(), e.end());
    }
    if (s.contains("const")) {
      const json& c = s.at("const");
      if (s.contains("enum"))
        std::erase_if(values, [&](const json& v) { return v != c; });
      else
        values = {c};
    }
    if (s.contains("type")) {
      const std::vector<std::string> types = types_of(s, path);
      std::erase_if(values, [&](const json& v) {
        return std::none_of(types.begin(), types.end(), [&](const std::string& t) { return is_type(v, t); });
      });
    }
    if (values.empty()) fail("'enum' and 'const' leave no value", path);
    std::vector<std::string> alts;
    for (const json& v : values) {
      std::string e = exact(v);
      if (std::find(alts.begin(), alts.end(), e) == alts.end()) alts.push_back(std::move(e));
    }
    return join(alts, " | ");
  }

  // One value, written as the JSON grammar does (`space` between tokens; members in its order).
  std::string exact(const json& v) {
    use("space");
    if (!v.is_object() && !v.is_array()) return gbnf_literal(v.dump()) + " space";
    std::vector<std::string> parts;
    if (v.is_object())
      for (const auto& [key, item] : v.items()) parts.push_back(gbnf_literal(json(key).dump()) + " space \":\" space " + exact(item));
    else
      for (const json& item : v) parts.push_back(exact(item));
    const std::string open = v.is_object() ? "\"{\" space" : "\"[\" space";
    const std::string close = v.is_object() ? "\"}\" space" : "\"]\" space";
    return join({open, join(parts, " \",\" space "), close}, " ");
  }

  std::vector<std::string> types_of(const json& s, const std::string& path) {
    std::vector<std::string> types;
    if (s.contains("type")) {
      const json& t = s.at("type");
      const std::string at = child(path, "type");
      const std::vector<json> names = t.is_array() ? std::vector<json>(t.begin(), t.end()) : std::vector<json>{t};
      if (names.empty()) fail("'type' must be a type name or a non-empty array of them", at);
      for (const json& n : names) {
        if (!n.is_string()) fail("'type' must be a type name or a non-empty array of them", at);
        const std::string name = n.get<std::string>();
        if (std::find(kTypes.begin(), kTypes.end(), name) == kTypes.end()) fail("unknown type '" + name + "'", at);
        if (std::find(types.begin(), types.end(), name) == types.end()) types.push_back(name);
      }
      return types;
    }
    // No type: the one the keywords are about (JSON Schema would let other types through; a
    // model asked for an object should get one).
    auto has_any = [&](std::initializer_list<const char*> keys) {
      return std::any_of(keys.begin(), keys.end(), [&](const char* k) { return s.contains(k); });
    };
    if (has_any({"properties", "required", "additionalProperties"})) types.push_back("object");
    if (has_any({"items", "prefixItems", "minItems", "maxItems"})) types.push_back("array");
    if (has_any({"minLength", "maxLength", "pattern", "format"})) types.push_back("string");
    if (has_any({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})) types.push_back("number");
    if (types.empty()) types = {"value"};
    return types;
  }

  std::string typed(const json& s, const std::string& t, const std::string& path, const std::string& hint,
                    int depth) {
    if (t == "value" || t == "null" || t == "boolean") return use(t);
    if (t == "number") return number(s, path);
    if (t == "integer") return integer(s, path);
    if (t == "string") return string(s, path);
    if (t == "object") return object(s, path, hint, depth);
    return array(s, path, hint, depth);
  }

  std::optional<uint32_t> count(const json& s, const char* key, const std::string& path) {
    if (!s.contains(key)) return std::nullopt;
    const json& v = s.at(key);
    const std::string at = child(path, key);
    if (!is_type(v, "integer") || v.get<double>() < 0) fail("'" + std::string(key) + "' must be a non-negative integer", at);
    if (v.get<double>() > kMaxRepetition)
      fail("unsupported keyword '" + std::string(key) + "' above " + std::to_string(kMaxRepetition), at);
    return static_cast<uint32_t>(v.get<double>());
  }

  // minimum / maximum / exclusiveMinimum / exclusiveMaximum (draft 4's boolean exclusive flags
  // too) as exact decimals, the strictest of each side.
  std::pair<std::optional<decimal_bound>, std::optional<decimal_bound>> bounds(const json& s, const std::string& path) {
    std::optional<decimal_bound> lo, hi;
    for (const std::string& b : kBounds) {
      if (!s.contains(b)) continue;
      const json& v = s.at(b);
      const std::string at = child(path, b);
      if (v.is_boolean()) {  // draft 4: exclusiveMinimum: true makes minimum exclusive
        const char* base = b == "exclusiveMinimum" ? "minimum" : b == "exclusiveMaximum" ? "maximum" : nullptr;
        if (!base) fail("'" + b + "' must be a number", at);
        if (v.get<bool>() && !s.contains(base)) fail("'" + b + "': true needs '" + base + "'", at);
        continue;
      }
      if (!v.is_number()) fail("'" + b + "' must be a number", at);
      decimal_bound d;
      try {
        d.value = decimal::parse(v.dump());  // a double's shortest text: the number as written
      } catch (const std::invalid_argument&) {
        fail("'" + b + "' must be a finite number", at);
      }
      const bool lower = b == "minimum" || b == "exclusiveMinimum";
      const char* flag = lower ? "exclusiveMinimum" : "exclusiveMaximum";
      d.exclusive = b == flag || (s.value(flag, json()).is_boolean() && s.at(flag).get<bool>());
      std::optional<decimal_bound>& side = lower ? lo : hi;
      const int c = side ? compare(d.value, side->value) : 0;
      if (!side || (lower ? c > 0 : c < 0) || (c == 0 && d.exclusive)) side = d;
    }
    return {lo, hi};
  }

  std::string integer(const json& s, const std::string& path) {
    const auto [dlo, dhi] = bounds(s, path);
    use("space");
    if (!dlo && !dhi) return use("integer");
    // On the integers: the least above the lower bound, the greatest below the upper one.
    std::optional<double> lo, hi;
    if (dlo) {
      const double x = std::strtod(dlo->value.text().c_str(), nullptr);
      lo = dlo->exclusive ? std::floor(x) + 1 : std::ceil(x);
    }
    if (dhi) {
      const double x = std::strtod(dhi->value.text().c_str(), nullptr);
      hi = dhi->exclusive ? std::ceil(x) - 1 : std::floor(x);
    }
    // Bounds past what `integer` can write anyway are no bounds.
    const auto limit = static_cast<double>(kMaxIntegerPart);
    if ((lo && *lo > limit) || (hi && *hi < -limit) || (lo && hi && *lo > *hi))
      fail("'minimum' / 'maximum' leave no integer", path);
    std::optional<int64_t> ilo, ihi;
    if (lo && *lo >= -limit) ilo = static_cast<int64_t>(*lo);
    if (hi && *hi <= limit) ihi = static_cast<int64_t>(*hi);
    return integer_range(ilo, ihi) + " space";
  }

  // Bounded numbers are written as plain decimals (no exponent), compared exactly as decimals.
  std::string number(const json& s, const std::string& path) {
    const auto [lo, hi] = bounds(s, path);
    if (!lo && !hi) return use("number");
    use("space");
    const auto range = decimal_range(lo, hi);
    if (!range) fail("'minimum' / 'maximum' leave no number", path);
    return *range + " space";
  }

  std::string string(const json& s, const std::string& path) {
    const auto min = count(s, "minLength", path), max = count(s, "maxLength", path);
    if (min && max && *min > *max) fail("'minLength' is above 'maxLength'", path);
    std::string format;
    if (s.contains("format")) {
      if (!s.at("format").is_string()) fail("'format' must be a string", child(path, "format"));
      if (kFormats.contains(s.at("format").get<std::string>())) format = s.at("format").get<std::string>();
    }
    const std::string quote = gbnf_literal("\"");
    use("space");
    if (s.contains("pattern")) {
      const std::string at = child(path, "pattern");
      for (const char* other : {"minLength", "maxLength"})
        if (s.contains(other)) fail("unsupported keyword '" + std::string(other) + "' next to 'pattern'", child(path, other));
      if (!format.empty()) fail("unsupported keyword 'format' next to 'pattern'", child(path, "format"));
      if (!s.at("pattern").is_string()) fail("'pattern' must be a string", at);
      try {
        return quote + " " + regex_to_gbnf_json_string(s.at("pattern").get<std::string>()) + " " + quote + " space";
      } catch (const error& e) {
        fail(e.what(), at);
      }
    }
    if (!format.empty()) {
      for (const char* other : {"minLength", "maxLength"})
        if (s.contains(other)) fail("unsupported keyword '" + std::string(other) + "' next to 'format'", child(path, other));
      return quote + " " + use(format) + " " + quote + " space";
    }
    if (!min && !max) return use("string");
    return quote + " " + repetition(use("char"), min.value_or(0), max.value_or(kInf)) + " " + quote + " space";
  }

  std::string object(const json& s, const std::string& path, const std::string& hint, int depth) {
    const json empty = json::object();
    const json& props = s.contains("properties") ? s.at("properties") : empty;
    if (!props.is_object()) fail("'properties' must be an object", child(path, "properties"));
    std::set<std::string> required;
    if (s.contains("required")) {
      const json& r = s.at("required");
      const std::string at = child(path, "required");
      if (!r.is_array()) fail("'required' must be an array of strings", at);
      for (const json& n : r) {
        if (!n.is_string()) fail("'required' must be an array of strings", at);
        if (!props.contains(n.get<std::string>()))
          fail("required property '" + n.get<std::string>() + "' is not in 'properties'", at);
        required.insert(n.get<std::string>());
      }
    }
    use("space");
    struct member {
      std::string kv;
      bool required;
      std::string name;
    };
    std::vector<member> members;
    for (const auto& [name, sub] : props.items()) {
      const bool req = required.contains(name);
      if (sub.is_boolean() && !sub.get<bool>()) {  // the property must not appear
        if (req) fail("required property '" + name + "' has the schema false", child(child(path, "properties"), name));
        continue;
      }
      const std::string value = ref(sub, child(child(path, "properties"), name), hint + "-" + name, depth + 1);
      const std::string kv =
          add_rule(hint + "-" + name + "-kv", gbnf_literal(json(name).dump()) + " space \":\" space " + value);
      members.push_back({kv, req, name});
    }
    // Keys beyond `properties` only where additionalProperties allows them; absent counts as
    // false when properties are listed (xgrammar's strict default: a model should not invent keys
    // the schema never named), and as true when none are, so that a bare {"type": "object"} (as
    // tool schemas write "any object") is any object, not only {}.
    std::string extra;
    if (!s.contains("additionalProperties") && !s.contains("properties")) {
      extra = add_rule(hint + "-additional-kv", use("string") + " \":\" space " + use("value"));
    } else if (s.contains("additionalProperties")) {
      const json& a = s.at("additionalProperties");
      const std::string at = child(path, "additionalProperties");
      if (!a.is_boolean() && !a.is_object()) fail("'additionalProperties' must be a boolean or a schema", at);
      if (!(a.is_boolean() && !a.get<bool>())) {
        const std::string value = ref(a, at, hint + "-additional", depth + 1);
        extra = add_rule(hint + "-additional-kv", use("string") + " \":\" space " + value);
      }
    }
    const std::string comma = "\",\" space ";
    const std::string extra_tail = extra.empty() ? "" : "( " + comma + extra + " )*";
    const size_t k = members.size();
    auto part = [&](size_t i) {
      return members[i].required ? comma + members[i].kv : "( " + comma + members[i].kv + " )?";
    };
    // What follows once members before j were considered: members j.. then extra keys.
    auto inline_from = [&](size_t j) {
      std::vector<std::string> parts;
      for (size_t i = j; i < k; ++i) parts.push_back(part(i));
      parts.push_back(extra_tail);
      return join(parts, " ");
    };
    const size_t first_required = static_cast<size_t>(
        std::find_if(members.begin(), members.end(), [](const member& m) { return m.required; }) - members.begin());
    std::string inner;
    if (k == 0) {
      inner = extra.empty() ? "" : "( " + join({extra, extra_tail}, " ") + " )?";
    } else if (first_required == 0) {
      inner = join({members[0].kv, inline_from(1)}, " ");
    } else {
      // The first member written can be any optional one before the first required one. after[j]:
      // the rest once member j-1 was written (a rule each, so the object stays linear in size).
      const size_t r = first_required;
      std::vector<std::string> after(r + 1);
      after[r] = inline_from(r);
      for (size_t j = r - 1; j >= 1; --j)
        after[j] = add_rule(hint + "-after-" + members[j - 1].name, join({part(j), after[j + 1]}, " "));
      std::vector<std::string> alts;
      for (size_t j = 0; j <= std::min(r, k - 1); ++j)
        alts.push_back(join({members[j].kv, j < r ? after[j + 1] : inline_from(j + 1)}, " "));
      if (r == k && !extra.empty()) alts.push_back(join({extra, extra_tail}, " "));
      inner = "( " + join(alts, " | ") + " )" + (r == k ? "?" : "");
    }
    return join({"\"{\" space", inner, "\"}\" space"}, " ");
  }

  std::string array(const json& s, const std::string& path, const std::string& hint, int depth) {
    std::vector<std::string> prefix;
    if (s.contains("prefixItems")) {
      const json& p = s.at("prefixItems");
      const std::string at = child(path, "prefixItems");
      if (!p.is_array()) fail("'prefixItems' must be an array of schemas", at);
      for (size_t i = 0; i < p.size(); ++i)
        prefix.push_back(ref(p[i], child(at, std::to_string(i)), hint + "-" + std::to_string(i), depth + 1));
    }
    std::string rest = use("value");  // items absent: anything after the prefix
    if (s.contains("items")) {
      const json& it = s.at("items");
      const std::string at = child(path, "items");
      if (it.is_array()) fail("'items' must be a schema (use prefixItems for tuples)", at);
      rest = it.is_boolean() && !it.get<bool>() ? "" : ref(it, at, hint + "-item", depth + 1);
    }
    const uint32_t lo = count(s, "minItems", path).value_or(0);
    const uint32_t hi = count(s, "maxItems", path).value_or(kInf);
    if (lo > hi) fail("'minItems' is above 'maxItems'", path);
    if (hi < prefix.size()) {
      prefix.resize(hi);
      rest.clear();
    }
    const auto k = static_cast<uint32_t>(prefix.size());
    if (rest.empty() && lo > k) fail("'minItems' asks for more items than 'prefixItems' allows", child(path, "minItems"));
    const std::string comma = "\",\" space ";
    use("space");
    // Built from the back: the items from position i on, given i items before them.
    std::string tail;
    if (!rest.empty() && hi > k) {
      const uint32_t rlo = lo > k ? lo - k : 0, rhi = hi == kInf ? kInf : hi - k;
      const std::string more = "( " + comma + rest + " )";
      if (k == 0) {
        tail = join({rest, repetition(more, rlo > 0 ? rlo - 1 : 0, rhi == kInf ? kInf : rhi - 1)}, " ");
        if (rlo == 0) tail = "( " + tail + " )?";
      } else {
        tail = repetition(more, rlo, rhi);
      }
    }
    for (uint32_t i = k; i-- > 0;) {
      const std::string cur = join({i > 0 ? comma + prefix[i] : prefix[i], tail}, " ");
      tail = i >= lo ? "( " + cur + " )?" : cur;
    }
    return join({"\"[\" space", tail, "\"]\" space"}, " ");
  }

  std::string assemble() const {
    std::string out;
    for (const auto& [name, b] : rules_) out += name + " ::= " + b + "\n";
    for (const primitive& p : primitives())
      if (used_.contains(p.name)) out += std::string(p.name) + " ::= " + p.body + "\n";
    if (out.size() > kMaxGrammarBytes) fail("the grammar would be over " + std::to_string(kMaxGrammarBytes) + " bytes", "");
    return out;
  }

  const json& root_;
  std::vector<std::pair<std::string, std::string>> rules_;  // in the order made; root first
  std::set<std::string> taken_;
  std::set<std::string, std::less<>> used_;                // shared rules to write
  std::map<std::string, std::string> defs_;                // $ref -> rule name
  size_t bytes_ = 0;
};

}  // namespace

std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema) { return converter(schema).schema(); }

std::string json_value_gbnf(bool object_only) {
  const json none;
  return converter(none).any_value(object_only);
}

}  // namespace troupe::grammar
