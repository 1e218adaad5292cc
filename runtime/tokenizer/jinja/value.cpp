// Python semantics of Jinja values (see value.hpp).
#include "runtime/tokenizer/jinja/value.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "runtime/core/error.hpp"
#include "runtime/tokenizer/utf8.hpp"

namespace troupe::jinja {

double value::as_double() const {
  if (is_int()) return static_cast<double>(std::get<int64_t>(v));
  if (is_float()) return std::get<double>(v);
  if (is_bool()) return std::get<bool>(v) ? 1.0 : 0.0;
  throw_error(errc::invalid_input, std::string("expected a number, got ") + type_name(*this));
}

const char* type_name(const value& v) {
  switch (v.v.index()) {
    case 0: return "undefined";
    case 1: return "none";
    case 2: return "bool";
    case 3: return "int";
    case 4: return "float";
    case 5: return "str";
    case 6: return "list";
    case 7: return v.as_dict().is_namespace ? "namespace" : "dict";
    default: return "function";
  }
}

bool truthy(const value& v) {
  switch (v.v.index()) {
    case 0:
    case 1: return false;
    case 2: return std::get<bool>(v.v);
    case 3: return std::get<int64_t>(v.v) != 0;
    case 4: return std::get<double>(v.v) != 0.0;
    case 5: return !v.str().empty();
    case 6: return !v.as_list().empty();
    case 7: return v.as_dict().is_namespace || !v.as_dict().items.empty();
    default: return true;
  }
}

bool equals(const value& a, const value& b) {
  if (a.is_number() && b.is_number()) {
    if ((a.is_int() || a.is_bool()) && (b.is_int() || b.is_bool())) {
      auto iv = [](const value& x) { return x.is_int() ? std::get<int64_t>(x.v) : int64_t{std::get<bool>(x.v)}; };
      return iv(a) == iv(b);
    }
    return a.as_double() == b.as_double();
  }
  if (a.v.index() != b.v.index()) return false;
  switch (a.v.index()) {
    case 0:
    case 1: return true;
    case 5: return a.str() == b.str();
    case 6: {
      const list& x = a.as_list();
      const list& y = b.as_list();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!equals(x[i], y[i])) return false;
      return true;
    }
    case 7: {
      const dict& x = a.as_dict();
      const dict& y = b.as_dict();
      if (x.is_namespace || y.is_namespace) return &x == &y;
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [k, val] : x.items) {
        const value* other = y.find(k);
        if (!other || !equals(val, *other)) return false;
      }
      return true;
    }
    default: return &a.as_callable() == &b.as_callable();
  }
}

bool less(const value& a, const value& b) {
  if (a.is_number() && b.is_number()) return a.as_double() < b.as_double();
  if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 bytes order = code points
  if (a.is_list() && b.is_list()) {
    const list& x = a.as_list();
    const list& y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equals(x[i], y[i])) continue;
      return less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  throw_error(errc::invalid_input, std::string("cannot compare ") + type_name(a) + " with " + type_name(b));
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  // Shortest round-trip digits, then Python's layout: fixed for exponents in [-4, 16), else
  // scientific with at least two exponent digits; fixed always shows a fractional part.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  size_t e = sci.find('e');
  std::string mant = sci.substr(0, e);
  int exp = std::stoi(sci.substr(e + 1));
  std::string digits;
  for (char c : mant)
    if (c != '.') digits.push_back(c);
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out = neg ? "-" : "";
  if (exp >= -4 && exp < 16) {
    if (exp >= 0) {
      size_t int_len = static_cast<size_t>(exp) + 1;
      if (digits.size() <= int_len) {
        out += digits + std::string(int_len - digits.size(), '0') + ".0";
      } else {
        out.append(digits, 0, int_len);
        out.push_back('.');
        out.append(digits, int_len, std::string::npos);
      }
    } else {
      out.append("0.");
      out.append(static_cast<size_t>(-exp - 1), '0');
      out.append(digits);
    }
  } else {
    out += digits.substr(0, 1);
    if (digits.size() > 1) {
      out.push_back('.');
      out.append(digits, 1, std::string::npos);
    }
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    out += eb;
  }
  return out;
}

namespace {

std::string repr_string(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos;
  bool has_double = s.find('"') != std::string::npos;
  char q = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == static_cast<unsigned char>(q)) {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += q;
  return out;
}

void json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  for (size_t i = 0; i < s.size();) {
    unsigned char c = p[i];
    switch (c) {
      case '"': out += "\\\""; ++i; continue;
      case '\\': out += "\\\\"; ++i; continue;
      case '\n': out += "\\n"; ++i; continue;
      case '\r': out += "\\r"; ++i; continue;
      case '\t': out += "\\t"; ++i; continue;
      case '\b': out += "\\b"; ++i; continue;
      case '\f': out += "\\f"; ++i; continue;
      default: break;
    }
    char b[16];
    if (c < 0x20) {
      std::snprintf(b, sizeof b, "\\u%04x", c);
      out += b;
      ++i;
    } else if (c < 0x80 || !ensure_ascii) {
      out += static_cast<char>(c);
      ++i;
    } else {
      char32_t cp;
      i += static_cast<size_t>(tok::decode_utf8(p + i, cp));
      if (cp >= 0x10000) {
        cp -= 0x10000;
        std::snprintf(b, sizeof b, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
      } else {
        std::snprintf(b, sizeof b, "\\u%04x", static_cast<unsigned>(cp));
      }
      out += b;
    }
  }
  out += '"';
}

void json_value(std::string& out, const value& v, const json_options& opt, int level) {
  auto newline = [&](int lvl) {
    out += '\n';
    out.append(static_cast<size_t>(opt.indent * lvl), ' ');
  };
  const char* item_sep = opt.indent >= 0 ? "," : ", ";
  switch (v.v.index()) {
    case 0: throw_error(errc::invalid_input, "tojson: an undefined value is not JSON serializable");
    case 1: out += "null"; return;
    case 2: out += std::get<bool>(v.v) ? "true" : "false"; return;
    case 3: out += std::to_string(std::get<int64_t>(v.v)); return;
    case 4: {
      double d = std::get<double>(v.v);
      if (std::isnan(d)) out += "NaN";
      else if (std::isinf(d)) out += d > 0 ? "Infinity" : "-Infinity";
      else out += float_repr(d);
      return;
    }
    case 5: json_string(out, v.str(), opt.ensure_ascii); return;
    case 6: {
      const list& l = v.as_list();
      if (l.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < l.size(); ++i) {
        if (i) out += item_sep;
        if (opt.indent >= 0) newline(level + 1);
        json_value(out, l[i], opt, level + 1);
      }
      if (opt.indent >= 0) newline(level);
      out += ']';
      return;
    }
    case 7: {
      const dict& d = v.as_dict();
      if (d.is_namespace) throw_error(errc::invalid_input, "tojson: a namespace is not JSON serializable");
      if (d.items.empty()) {
        out += "{}";
        return;
      }
      std::vector<const std::pair<std::string, value>*> items;
      for (const auto& kv : d.items) items.push_back(&kv);
      if (opt.sort_keys)
        std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
      out += '{';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += item_sep;
        if (opt.indent >= 0) newline(level + 1);
        json_string(out, items[i]->first, opt.ensure_ascii);
        out += ": ";
        json_value(out, items[i]->second, opt, level + 1);
      }
      if (opt.indent >= 0) newline(level);
      out += '}';
      return;
    }
    default: throw_error(errc::invalid_input, "tojson: a function is not JSON serializable");
  }
}

}  // namespace

std::string repr(const value& v) {
  switch (v.v.index()) {
    case 5: return repr_string(v.str());
    case 6: {
      std::string out = "[";
      const list& l = v.as_list();
      for (size_t i = 0; i < l.size(); ++i) {
        if (i) out += ", ";
        out += repr(l[i]);
      }
      return out + "]";
    }
    case 7: {
      const dict& d = v.as_dict();
      std::string out = d.is_namespace ? "<Namespace {" : "{";
      for (size_t i = 0; i < d.items.size(); ++i) {
        if (i) out += ", ";
        out += repr_string(d.items[i].first) + ": " + repr(d.items[i].second);
      }
      return out + (d.is_namespace ? "}>" : "}");
    }
    default: return to_str(v);
  }
}

std::string to_str(const value& v) {
  switch (v.v.index()) {
    case 0: return "";
    case 1: return "None";
    case 2: return std::get<bool>(v.v) ? "True" : "False";
    case 3: return std::to_string(std::get<int64_t>(v.v));
    case 4: return float_repr(std::get<double>(v.v));
    case 5: return v.str();
    case 8: return "<function " + v.as_callable().name + ">";
    default: return repr(v);
  }
}

std::string to_json(const value& v, const json_options& opt) {
  std::string out;
  json_value(out, v, opt, 0);
  return out;
}

value from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return value(none{});
    case nlohmann::ordered_json::value_t::boolean: return value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      uint64_t u = j.get<uint64_t>();
      if (u <= static_cast<uint64_t>(INT64_MAX)) return value(static_cast<int64_t>(u));
      return value(static_cast<double>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return value(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      value l = value::make_list();
      l.as_list().reserve(j.size());
      for (const auto& e : j) l.as_list().push_back(from_json(e));
      return l;
    }
    case nlohmann::ordered_json::value_t::object: {
      value d = value::make_dict();
      for (auto it = j.begin(); it != j.end(); ++it) d.as_dict().items.emplace_back(it.key(), from_json(it.value()));
      return d;
    }
    default: return value(none{});  // binary / discarded: not produced by JSON text
  }
}

std::u32string to_u32(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  for (size_t i = 0; i < s.size();) {
    char32_t cp;
    i += static_cast<size_t>(tok::decode_utf8(p + i, cp));
    out.push_back(cp);
  }
  return out;
}

std::string from_u32(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) tok::append_utf8(out, c);
  return out;
}

size_t count_code_points(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

}  // namespace troupe::jinja
