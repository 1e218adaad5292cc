// Values of the Jinja subset engine, with Python's semantics where chat templates can see them:
// str() and repr() of every type, truthiness, ==, ordering, and json.dumps (transformers' tojson).
// Lists and dicts are shared by reference, as in Python, so namespace() attributes set in a loop
// are visible after it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace troupe::jinja {

struct value;
struct dict;
using list = std::vector<value>;
using kwargs = std::vector<std::pair<std::string, value>>;

struct undefined {
  std::string name;  // what was looked up, for error messages
};
struct none {};

struct callable {
  std::string name;
  std::function<value(std::vector<value>& args, kwargs& kw)> fn;
};

struct value {
  using storage = std::variant<undefined, none, bool, int64_t, double, std::string, std::shared_ptr<list>,
                               std::shared_ptr<dict>, std::shared_ptr<callable>>;
  storage v;

  value() : v(undefined{}) {}
  value(undefined u) : v(std::move(u)) {}
  value(none n) : v(n) {}
  value(bool b) : v(b) {}
  value(int64_t i) : v(i) {}
  value(int i) : v(static_cast<int64_t>(i)) {}
  value(size_t i) : v(static_cast<int64_t>(i)) {}
  value(double d) : v(d) {}
  value(std::string s) : v(std::move(s)) {}
  value(std::string_view s) : v(std::string(s)) {}
  value(const char* s) : v(std::string(s)) {}
  value(std::shared_ptr<list> l) : v(std::move(l)) {}
  value(std::shared_ptr<dict> d) : v(std::move(d)) {}
  value(std::shared_ptr<callable> c) : v(std::move(c)) {}

  bool is_undefined() const { return std::holds_alternative<undefined>(v); }
  bool is_none() const { return std::holds_alternative<none>(v); }
  bool is_bool() const { return std::holds_alternative<bool>(v); }
  bool is_int() const { return std::holds_alternative<int64_t>(v); }
  bool is_float() const { return std::holds_alternative<double>(v); }
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return std::holds_alternative<std::string>(v); }
  bool is_list() const { return std::holds_alternative<std::shared_ptr<list>>(v); }
  bool is_dict() const { return std::holds_alternative<std::shared_ptr<dict>>(v); }
  bool is_callable() const { return std::holds_alternative<std::shared_ptr<callable>>(v); }

  const std::string& str() const { return std::get<std::string>(v); }
  list& as_list() const { return *std::get<std::shared_ptr<list>>(v); }
  dict& as_dict() const { return *std::get<std::shared_ptr<dict>>(v); }
  const callable& as_callable() const { return *std::get<std::shared_ptr<callable>>(v); }
  double as_double() const;  // numbers (bool as 0/1)

  static value make_list(list items = {}) { return value(std::make_shared<list>(std::move(items))); }
  static value make_dict();
  static value make_namespace();
  static value make_callable(std::string name, std::function<value(std::vector<value>&, kwargs&)> fn) {
    return value(std::make_shared<callable>(callable{std::move(name), std::move(fn)}));
  }
};

// Insertion-ordered string-keyed mapping (JSON objects keep their key order, as Python dicts do).
struct dict {
  std::vector<std::pair<std::string, value>> items;
  bool is_namespace = false;

  const value* find(std::string_view key) const {
    for (const auto& kv : items)
      if (kv.first == key) return &kv.second;
    return nullptr;
  }
  void set(const std::string& key, value val) {
    for (auto& kv : items)
      if (kv.first == key) {
        kv.second = std::move(val);
        return;
      }
    items.emplace_back(key, std::move(val));
  }
};

inline value value::make_dict() { return value(std::make_shared<dict>()); }
inline value value::make_namespace() {
  auto d = std::make_shared<dict>();
  d->is_namespace = true;
  return value(std::move(d));
}

const char* type_name(const value& v);
bool truthy(const value& v);
bool equals(const value& a, const value& b);  // Python ==
// Python <, for numbers and strings; throws for other types.
bool less(const value& a, const value& b);

std::string to_str(const value& v);   // Python str(); undefined -> ""
std::string repr(const value& v);     // Python repr()
std::string float_repr(double d);     // Python repr(float): shortest round trip

struct json_options {
  int indent = -1;  // < 0: one line with ", " and ": "
  bool ensure_ascii = false;
  bool sort_keys = false;
};
// Python json.dumps. Throws troupe::error(invalid_input) for values JSON cannot hold.
std::string to_json(const value& v, const json_options& opt = {});

value from_json(const nlohmann::ordered_json& j);

// Code-point view of UTF-8 strings (Python strings index code points, not bytes).
std::u32string to_u32(std::string_view s);
std::string from_u32(std::u32string_view s);
size_t count_code_points(std::string_view s);

}  // namespace troupe::jinja
