// Built-in filters, tests, methods and global functions of the Jinja subset, with the
// semantics of Jinja2 3.1 and Python 3 str/dict methods, plus transformers' chat-template
// additions (tojson without HTML escaping, raise_exception, strftime_now).
#include <algorithm>
#include <cmath>
#include <ctime>
#include <utf8proc.h>

#include "runtime/core/error.hpp"
#include "runtime/tokenizer/jinja/context.hpp"

namespace troupe::jinja {

namespace {

[[noreturn]] void fail(const std::string& what) { throw_error(errc::invalid_input, what); }

const value* kwarg(const kwargs& kw, const char* name) {
  for (const auto& [k, v] : kw)
    if (k == name) return &v;
  return nullptr;
}

// Argument i by position, else by keyword, else nullptr.
const value* arg(const std::vector<value>& args, const kwargs& kw, size_t i, const char* name) {
  if (i < args.size()) return &args[i];
  return kwarg(kw, name);
}

const std::string& need_string(const value& v, const std::string& what) {
  if (!v.is_string()) fail(what + " needs a string, got " + type_name(v));
  return v.str();
}

int64_t need_int(const value& v, const std::string& what) {
  if (v.is_int()) return std::get<int64_t>(v.v);
  if (v.is_bool()) return std::get<bool>(v.v);
  fail(what + " needs an integer, got " + type_name(v));
}

// Python's str.isspace() characters.
bool py_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

std::string strip(const std::string& s, const value* chars, bool left, bool right) {
  std::u32string u = to_u32(s);
  std::u32string set;
  bool use_set = chars && !chars->is_none();
  if (use_set) set = to_u32(need_string(*chars, "strip"));
  auto drop = [&](char32_t c) { return use_set ? set.find(c) != std::u32string::npos : py_space(c); };
  size_t b = 0, e = u.size();
  if (left)
    while (b < e && drop(u[b])) ++b;
  if (right)
    while (e > b && drop(u[e - 1])) --e;
  return from_u32(std::u32string_view(u).substr(b, e - b));
}

value split(const std::string& s, const value* sep, int64_t maxsplit, bool from_right) {
  list out;
  if (!sep || sep->is_none()) {  // runs of white space, no empty parts
    std::u32string u = to_u32(s);
    std::vector<std::pair<size_t, size_t>> words;
    size_t i = 0;
    while (i < u.size()) {
      while (i < u.size() && py_space(u[i])) ++i;
      if (i >= u.size()) break;
      size_t j = i;
      while (j < u.size() && !py_space(u[j])) ++j;
      words.emplace_back(i, j);
      i = j;
    }
    if (maxsplit >= 0 && static_cast<int64_t>(words.size()) > maxsplit + 1) {
      // The remainder keeps its inner white space (trailing space trimmed, as Python does).
      if (!from_right) {
        size_t keep = static_cast<size_t>(maxsplit);
        for (size_t k = 0; k < keep; ++k) out.push_back(value(from_u32(u.substr(words[k].first, words[k].second - words[k].first))));
        out.push_back(value(from_u32(u.substr(words[keep].first, words.back().second - words[keep].first))));
      } else {
        size_t first_kept = words.size() - static_cast<size_t>(maxsplit);
        out.push_back(value(from_u32(u.substr(words[0].first, words[first_kept - 1].second - words[0].first))));
        for (size_t k = first_kept; k < words.size(); ++k)
          out.push_back(value(from_u32(u.substr(words[k].first, words[k].second - words[k].first))));
      }
      return value::make_list(std::move(out));
    }
    for (auto [b, e] : words) out.push_back(value(from_u32(u.substr(b, e - b))));
    return value::make_list(std::move(out));
  }
  const std::string& d = need_string(*sep, "split");
  if (d.empty()) fail("split: empty separator");
  std::vector<std::string> parts;
  if (!from_right) {
    size_t pos = 0;
    int64_t n = 0;
    while (maxsplit < 0 || n < maxsplit) {
      size_t hit = s.find(d, pos);
      if (hit == std::string::npos) break;
      parts.push_back(s.substr(pos, hit - pos));
      pos = hit + d.size();
      ++n;
    }
    parts.push_back(s.substr(pos));
  } else {
    size_t end = s.size();
    int64_t n = 0;
    std::vector<std::string> rev;
    while (maxsplit < 0 || n < maxsplit) {
      if (end < d.size()) break;
      size_t hit = s.rfind(d, end - d.size());
      if (hit == std::string::npos) break;
      rev.push_back(s.substr(hit + d.size(), end - hit - d.size()));
      end = hit;
      ++n;
    }
    rev.push_back(s.substr(0, end));
    parts.assign(rev.rbegin(), rev.rend());
  }
  for (auto& p : parts) out.push_back(value(std::move(p)));
  return value::make_list(std::move(out));
}

enum class case_map { upper, lower, title };
std::string map_case(const std::string& s, case_map m) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : to_u32(s)) {
    auto cp = static_cast<utf8proc_int32_t>(c);
    cp = m == case_map::upper ? utf8proc_toupper(cp) : m == case_map::lower ? utf8proc_tolower(cp) : utf8proc_totitle(cp);
    out += from_u32(std::u32string(1, static_cast<char32_t>(cp)));
  }
  return out;
}

bool is_cased_letter(char32_t c) {
  auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT;
}

std::string title(const std::string& s) {  // Python str.title(): a cased letter after a non-letter starts a word
  std::string out;
  bool prev_cased = false;
  for (char32_t c : to_u32(s)) {
    std::string one = from_u32(std::u32string(1, c));
    out += map_case(one, prev_cased ? case_map::lower : case_map::title);
    prev_cased = is_cased_letter(c);
  }
  return out;
}

std::string capitalize(const std::string& s) {
  std::u32string u = to_u32(s);
  if (u.empty()) return s;
  return map_case(from_u32(u.substr(0, 1)), case_map::title) + map_case(from_u32(u.substr(1)), case_map::lower);
}

std::string replace(const std::string& s, const std::string& old, const std::string& rep, int64_t count) {
  std::string out;
  if (old.empty()) {  // Python inserts `rep` between characters and at both ends
    std::u32string u = to_u32(s);
    int64_t n = 0;
    for (size_t i = 0; i <= u.size(); ++i) {
      if (count < 0 || n < count) {
        out += rep;
        ++n;
      }
      if (i < u.size()) out += from_u32(u.substr(i, 1));
    }
    return out;
  }
  size_t pos = 0;
  int64_t n = 0;
  while (count < 0 || n < count) {
    size_t hit = s.find(old, pos);
    if (hit == std::string::npos) break;
    out.append(s, pos, hit - pos);
    out += rep;
    pos = hit + old.size();
    ++n;
  }
  out.append(s, pos, std::string::npos);
  return out;
}

bool prefix_test(const std::string& s, const value& p, bool suffix) {
  auto one = [&](const value& x) {
    const std::string& t = need_string(x, suffix ? "endswith" : "startswith");
    if (t.size() > s.size()) return false;
    return suffix ? s.compare(s.size() - t.size(), t.size(), t) == 0 : s.compare(0, t.size(), t) == 0;
  };
  if (p.is_list()) {
    for (const value& x : p.as_list())
      if (one(x)) return true;
    return false;
  }
  return one(p);
}

value method(const value& self, const std::string& name) {
  auto bind = [&](auto fn) {
    value captured = self;
    return value::make_callable(name, [captured, fn](std::vector<value>& a, kwargs& kw) { return fn(captured, a, kw); });
  };
  if (self.is_string()) {
    if (name == "startswith" || name == "endswith") {
      bool suffix = name == "endswith";
      return bind([suffix, name](const value& s, std::vector<value>& a, kwargs&) {
        if (a.size() != 1) fail(name + "() takes one argument here");
        return value(prefix_test(s.str(), a[0], suffix));
      });
    }
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
      bool l = name != "rstrip", r = name != "lstrip";
      return bind([l, r](const value& s, std::vector<value>& a, kwargs& kw) {
        return value(strip(s.str(), arg(a, kw, 0, "chars"), l, r));
      });
    }
    if (name == "split" || name == "rsplit") {
      bool from_right = name == "rsplit";
      return bind([from_right](const value& s, std::vector<value>& a, kwargs& kw) {
        const value* m = arg(a, kw, 1, "maxsplit");
        return split(s.str(), arg(a, kw, 0, "sep"), m ? need_int(*m, "split") : -1, from_right);
      });
    }
    if (name == "upper" || name == "lower") {
      case_map m = name == "upper" ? case_map::upper : case_map::lower;
      return bind([m](const value& s, std::vector<value>&, kwargs&) { return value(map_case(s.str(), m)); });
    }
    if (name == "title") return bind([](const value& s, std::vector<value>&, kwargs&) { return value(title(s.str())); });
    if (name == "capitalize")
      return bind([](const value& s, std::vector<value>&, kwargs&) { return value(capitalize(s.str())); });
    if (name == "replace") {
      return bind([](const value& s, std::vector<value>& a, kwargs& kw) {
        const value* o = arg(a, kw, 0, "old");
        const value* n = arg(a, kw, 1, "new");
        const value* c = arg(a, kw, 2, "count");
        if (!o || !n) fail("replace() needs old and new");
        return value(replace(s.str(), need_string(*o, "replace"), need_string(*n, "replace"), c ? need_int(*c, "replace") : -1));
      });
    }
    if (name == "find" || name == "count" || name == "rfind") {
      return bind([name](const value& s, std::vector<value>& a, kwargs&) {
        if (a.size() != 1) fail(name + "() takes one argument here");
        const std::string& sub = need_string(a[0], name);
        const std::string& str = s.str();
        if (name == "count") {
          if (sub.empty()) return value(static_cast<int64_t>(count_code_points(str) + 1));
          int64_t n = 0;
          for (size_t p = str.find(sub); p != std::string::npos; p = str.find(sub, p + sub.size())) ++n;
          return value(n);
        }
        size_t p = name == "find" ? str.find(sub) : str.rfind(sub);
        if (p == std::string::npos) return value(int64_t{-1});
        return value(static_cast<int64_t>(count_code_points(std::string_view(str).substr(0, p))));
      });
    }
    if (name == "join") {
      return bind([](const value& s, std::vector<value>& a, kwargs&) {
        if (a.size() != 1) fail("join() takes one argument");
        std::string out;
        bool first = true;
        for (const value& x : iterate(a[0])) {
          if (!first) out += s.str();
          out += need_string(x, "join");
          first = false;
        }
        return value(std::move(out));
      });
    }
    if (name == "splitlines") {
      return bind([](const value& s, std::vector<value>&, kwargs&) {
        list out;
        const std::string& str = s.str();
        size_t b = 0;
        for (size_t i = 0; i < str.size(); ++i) {
          if (str[i] == '\n' || str[i] == '\r') {
            out.push_back(value(str.substr(b, i - b)));
            if (str[i] == '\r' && i + 1 < str.size() && str[i + 1] == '\n') ++i;
            b = i + 1;
          }
        }
        if (b < str.size()) out.push_back(value(str.substr(b)));
        return value::make_list(std::move(out));
      });
    }
    if (name == "isdigit" || name == "isalpha" || name == "isspace" || name == "isupper" || name == "islower") {
      return bind([name](const value& s, std::vector<value>&, kwargs&) {
        std::u32string u = to_u32(s.str());
        if (u.empty()) return value(false);
        bool any_cased = false;
        for (char32_t c : u) {
          auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
          if (name == "isdigit" && cat != UTF8PROC_CATEGORY_ND && !(c >= 0xB2 && c <= 0xB9)) return value(false);
          if (name == "isalpha" && !(cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO)) return value(false);
          if (name == "isspace" && !py_space(c)) return value(false);
          if (name == "isupper" && cat == UTF8PROC_CATEGORY_LL) return value(false);
          if (name == "islower" && cat == UTF8PROC_CATEGORY_LU) return value(false);
          any_cased |= cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT;
        }
        if (name == "isupper" || name == "islower") return value(any_cased);
        return value(true);
      });
    }
    return value(undefined{"str object has no attribute '" + name + "'"});
  }
  if (self.is_dict() && !self.as_dict().is_namespace) {
    if (name == "items" || name == "keys" || name == "values") {
      return bind([name](const value& d, std::vector<value>&, kwargs&) {
        list out;
        for (const auto& [k, v] : d.as_dict().items) {
          if (name == "items") out.push_back(value::make_list({value(k), v}));
          else if (name == "keys") out.push_back(value(k));
          else out.push_back(v);
        }
        return value::make_list(std::move(out));
      });
    }
    if (name == "get") {
      return bind([](const value& d, std::vector<value>& a, kwargs&) {
        if (a.empty() || a.size() > 2) fail("get() takes a key and an optional default");
        if (a[0].is_string())
          if (const value* v = d.as_dict().find(a[0].str())) return *v;
        return a.size() == 2 ? a[1] : value(none{});
      });
    }
  }
  return value(undefined{std::string(type_name(self)) + " object has no attribute '" + name + "'"});
}

value filter_map_one(const std::string& filter, const value& item, std::vector<value>& rest, kwargs& kw, context& ctx) {
  kwargs k2 = kw;
  std::vector<value> a2 = rest;
  return apply_filter(filter, item, a2, k2, ctx);
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

value attribute_of(const value& item, const std::string& path) {  // "a.b" or "0"
  value cur = item;
  size_t b = 0;
  while (b <= path.size()) {
    size_t e = path.find('.', b);
    if (e == std::string::npos) e = path.size();
    std::string part = path.substr(b, e - b);
    bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (numeric && part.size() > 18) fail("attribute '" + path + "': index " + part + " out of range");
    cur = numeric ? get_item(cur, value(static_cast<int64_t>(std::stoll(part)))) : get_attribute(cur, part);
    b = e + 1;
  }
  return cur;
}

}  // namespace

list iterate(const value& v) {
  if (v.is_list()) return v.as_list();
  if (v.is_undefined()) return {};
  if (v.is_dict()) {
    list keys;
    for (const auto& kv : v.as_dict().items) keys.push_back(value(kv.first));
    return keys;
  }
  if (v.is_string()) {
    list chars;
    for (char32_t c : to_u32(v.str())) chars.push_back(value(from_u32(std::u32string(1, c))));
    return chars;
  }
  fail(std::string("'") + type_name(v) + "' object is not iterable");
}

value get_attribute(const value& obj, const std::string& name) {
  if (obj.is_dict()) {
    const dict& d = obj.as_dict();
    if (!d.is_namespace && (name == "items" || name == "keys" || name == "values" || name == "get")) return method(obj, name);
    if (const value* v = d.find(name)) return *v;
    return value(undefined{name});
  }
  if (obj.is_string()) return method(obj, name);
  return value(undefined{std::string(type_name(obj)) + " object has no attribute '" + name + "'"});
}

value get_item(const value& obj, const value& index) {
  if (obj.is_list() && (index.is_int() || index.is_bool())) {
    const list& l = obj.as_list();
    int64_t i = need_int(index, "index");
    if (i < 0) i += static_cast<int64_t>(l.size());
    if (i < 0 || i >= static_cast<int64_t>(l.size())) return value(undefined{"list index " + std::to_string(i)});
    return l[static_cast<size_t>(i)];
  }
  if (obj.is_string() && (index.is_int() || index.is_bool())) {
    std::u32string u = to_u32(obj.str());
    int64_t i = need_int(index, "index");
    if (i < 0) i += static_cast<int64_t>(u.size());
    if (i < 0 || i >= static_cast<int64_t>(u.size())) return value(undefined{"string index " + std::to_string(i)});
    return value(from_u32(u.substr(static_cast<size_t>(i), 1)));
  }
  if (obj.is_dict() && index.is_string()) {
    if (const value* v = obj.as_dict().find(index.str())) return *v;
    return value(undefined{index.str()});
  }
  if (index.is_string()) return get_attribute(obj, index.str());
  return value(undefined{std::string(type_name(obj)) + " object has no item " + repr(index)});
}

bool contains(const value& container, const value& item) {
  if (container.is_string()) {
    if (!item.is_string()) fail(std::string("'in <string>' requires a string as left operand, not ") + type_name(item));
    return container.str().find(item.str()) != std::string::npos;
  }
  if (container.is_list()) {
    for (const value& x : container.as_list())
      if (equals(x, item)) return true;
    return false;
  }
  if (container.is_dict()) return item.is_string() && container.as_dict().find(item.str()) != nullptr;
  if (container.is_undefined()) return false;
  fail(std::string("argument of type '") + type_name(container) + "' is not iterable");
}

bool apply_test(const std::string& name, const value& v, std::vector<value>& args, context& ctx) {
  (void)ctx;
  auto need_arg = [&]() -> const value& {
    if (args.size() != 1) fail("test '" + name + "' takes one argument");
    return args[0];
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && std::get<bool>(v.v);
  if (name == "false") return v.is_bool() && !std::get<bool>(v.v);
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  if (name == "sequence") return v.is_list() || v.is_string() || v.is_dict();
  if (name == "iterable") return v.is_list() || v.is_string() || v.is_dict() || v.is_undefined();
  if (name == "callable") return v.is_callable();
  if (name == "odd" || name == "even") {
    int64_t i = need_int(v, "test " + name);
    return (i % 2 != 0) == (name == "odd");
  }
  if (name == "divisibleby") {
    int64_t d = need_int(need_arg(), "divisibleby");
    if (d == 0) fail("divisibleby 0");
    return need_int(v, "divisibleby") % d == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==") return equals(v, need_arg());
  if (name == "ne" || name == "!=") return !equals(v, need_arg());
  if (name == "lt" || name == "lessthan" || name == "<") return less(v, need_arg());
  if (name == "gt" || name == "greaterthan" || name == ">") return less(need_arg(), v);
  if (name == "le" || name == "<=") return !less(need_arg(), v);
  if (name == "ge" || name == ">=") return !less(v, need_arg());
  if (name == "in") return contains(need_arg(), v);
  if (name == "sameas") {
    const value& o = need_arg();
    if (v.v.index() != o.v.index()) return false;
    if (v.is_list()) return &v.as_list() == &o.as_list();
    if (v.is_dict()) return &v.as_dict() == &o.as_dict();
    return equals(v, o);
  }
  if (name == "lower" || name == "upper") {
    if (!v.is_string()) return false;
    return map_case(v.str(), name == "lower" ? case_map::lower : case_map::upper) == v.str();
  }
  throw_error(errc::unsupported, "unsupported test '" + name + "'");
}

value apply_filter(const std::string& name, value v, std::vector<value>& args, kwargs& kw, context& ctx) {
  auto require = [&](const value& x) {
    if (x.is_undefined()) {
      const auto& u = std::get<undefined>(x.v);
      fail((u.name.empty() ? std::string("a value") : u.name) + " is undefined (filter " + name + ")");
    }
  };
  if (name == "length" || name == "count") {
    if (v.is_undefined()) return value(int64_t{0});
    if (v.is_string()) return value(static_cast<int64_t>(count_code_points(v.str())));
    if (v.is_list()) return value(static_cast<int64_t>(v.as_list().size()));
    if (v.is_dict()) return value(static_cast<int64_t>(v.as_dict().items.size()));
    fail(std::string("object of type '") + type_name(v) + "' has no len()");
  }
  if (name == "tojson") {
    json_options o;
    if (const value* i = arg(args, kw, 0, "indent"); i && !i->is_none()) o.indent = static_cast<int>(need_int(*i, "tojson indent"));
    if (const value* a = kwarg(kw, "ensure_ascii")) o.ensure_ascii = truthy(*a);
    if (const value* s = kwarg(kw, "sort_keys")) o.sort_keys = truthy(*s);
    return value(to_json(v, o));
  }
  if (name == "default" || name == "d") {
    const value* b = arg(args, kw, 1, "boolean");
    bool use_default = v.is_undefined() || (b && truthy(*b) && !truthy(v));
    if (!use_default) return v;
    const value* d = arg(args, kw, 0, "default_value");
    return d ? *d : value("");
  }
  if (name == "safe") return v;
  if (name == "string") return value(to_str(v));
  if (name == "list") return value::make_list(iterate(v));
  require(v);
  if (name == "trim") return value(strip(need_string(v, "trim"), arg(args, kw, 0, "chars"), true, true));
  if (name == "upper") return value(map_case(need_string(v, "upper"), case_map::upper));
  if (name == "lower") return value(map_case(need_string(v, "lower"), case_map::lower));
  if (name == "title") return value(title(need_string(v, "title")));
  if (name == "capitalize") return value(capitalize(need_string(v, "capitalize")));
  if (name == "escape" || name == "e") return value(html_escape(to_str(v)));
  if (name == "first" || name == "last") {
    list items = iterate(v);
    if (items.empty()) return value(undefined{"first/last of an empty sequence"});
    return name == "first" ? items.front() : items.back();
  }
  if (name == "reverse") {
    if (v.is_string()) {
      std::u32string u = to_u32(v.str());
      std::reverse(u.begin(), u.end());
      return value(from_u32(u));
    }
    list items = iterate(v);
    std::reverse(items.begin(), items.end());
    return value::make_list(std::move(items));
  }
  if (name == "join") {
    const value* sep = arg(args, kw, 0, "d");
    const value* attr = arg(args, kw, 1, "attribute");
    std::string out;
    bool first = true;
    for (const value& x : iterate(v)) {
      if (!first && sep) out += to_str(*sep);
      out += to_str(attr ? attribute_of(x, to_str(*attr)) : x);
      first = false;
    }
    return value(std::move(out));
  }
  if (name == "items") {
    if (!v.is_dict()) fail(std::string("items needs a mapping, got ") + type_name(v));
    list out;
    for (const auto& [k, val] : v.as_dict().items) out.push_back(value::make_list({value(k), val}));
    return value::make_list(std::move(out));
  }
  if (name == "int") {
    const value* d = arg(args, kw, 0, "default");
    if (v.is_int()) return v;
    if (v.is_bool()) return value(int64_t{std::get<bool>(v.v)});
    if (v.is_float()) return value(static_cast<int64_t>(std::get<double>(v.v)));
    if (v.is_string()) {
      try {
        size_t used = 0;
        std::string s = strip(v.str(), nullptr, true, true);
        int64_t i = std::stoll(s, &used);
        if (used == s.size()) return value(i);
      } catch (const std::exception&) {
      }
    }
    return d ? *d : value(int64_t{0});
  }
  if (name == "float") {
    const value* d = arg(args, kw, 0, "default");
    if (v.is_number()) return value(v.as_double());
    if (v.is_string()) {
      try {
        size_t used = 0;
        std::string s = strip(v.str(), nullptr, true, true);
        double x = std::stod(s, &used);
        if (used == s.size()) return value(x);
      } catch (const std::exception&) {
      }
    }
    return d ? *d : value(0.0);
  }
  if (name == "abs") {
    if (v.is_float()) return value(std::fabs(std::get<double>(v.v)));
    return value(std::abs(need_int(v, "abs")));
  }
  if (name == "round") {
    const value* p = arg(args, kw, 0, "precision");
    const value* m = arg(args, kw, 1, "method");
    int64_t prec = p ? need_int(*p, "round") : 0;
    std::string method = m ? need_string(*m, "round") : "common";
    double x = v.as_double(), scale = std::pow(10.0, static_cast<double>(prec));
    double r = method == "ceil" ? std::ceil(x * scale) : method == "floor" ? std::floor(x * scale) : std::round(x * scale);
    return value(r / scale);
  }
  if (name == "replace") {
    const value* o = arg(args, kw, 0, "old");
    const value* n = arg(args, kw, 1, "new");
    const value* c = arg(args, kw, 2, "count");
    if (!o || !n) fail("replace needs old and new");
    return value(replace(to_str(v), to_str(*o), to_str(*n), c && !c->is_none() ? need_int(*c, "replace") : -1));
  }
  if (name == "indent") {
    const value* w = arg(args, kw, 0, "width");
    const value* f = arg(args, kw, 1, "first");
    const value* b = arg(args, kw, 2, "blank");
    std::string pad = w ? (w->is_string() ? w->str() : std::string(static_cast<size_t>(need_int(*w, "indent")), ' ')) : "    ";
    bool first = f && truthy(*f), blank = b && truthy(*b);
    std::string s = to_str(v), out;
    size_t start = 0;
    bool line0 = true;
    while (start <= s.size()) {
      size_t e = s.find('\n', start);
      std::string line = s.substr(start, e == std::string::npos ? std::string::npos : e - start);
      bool indent = (line0 ? first : true) && (blank || !line.empty());
      if (indent) out += pad;
      out += line;
      if (e == std::string::npos) break;
      out += '\n';
      start = e + 1;
      line0 = false;
    }
    return value(std::move(out));
  }
  if (name == "wordcount") return value(static_cast<int64_t>(split(to_str(v), nullptr, -1, false).as_list().size()));
  if (name == "unique") {
    list out;
    for (const value& x : iterate(v)) {
      bool seen = false;
      for (const value& y : out) seen = seen || equals(x, y);
      if (!seen) out.push_back(x);
    }
    return value::make_list(std::move(out));
  }
  if (name == "sort" || name == "min" || name == "max") {
    const value* rev = kwarg(kw, "reverse");
    const value* attr = kwarg(kw, "attribute");
    if (name == "sort" && !rev) rev = arg(args, kw, 0, "reverse");
    list items = iterate(v);
    auto key = [&](const value& x) { return attr ? attribute_of(x, to_str(*attr)) : x; };
    std::stable_sort(items.begin(), items.end(), [&](const value& a, const value& b) { return less(key(a), key(b)); });
    if (name == "min") return items.empty() ? value(undefined{"min of an empty sequence"}) : items.front();
    if (name == "max") return items.empty() ? value(undefined{"max of an empty sequence"}) : items.back();
    if (rev && truthy(*rev)) std::reverse(items.begin(), items.end());
    return value::make_list(std::move(items));
  }
  if (name == "sum") {
    const value* attr = arg(args, kw, 0, "attribute");
    const value* start = arg(args, kw, 1, "start");
    value total = start ? *start : value(int64_t{0});
    for (const value& x : iterate(v)) {
      value term = attr ? attribute_of(x, to_str(*attr)) : x;
      total = total.is_int() && term.is_int() ? value(std::get<int64_t>(total.v) + std::get<int64_t>(term.v))
                                              : value(total.as_double() + term.as_double());
    }
    return total;
  }
  if (name == "map") {
    list out;
    if (const value* attr = kwarg(kw, "attribute")) {
      const value* def = kwarg(kw, "default");
      for (const value& x : iterate(v)) {
        value a = attribute_of(x, to_str(*attr));
        out.push_back(a.is_undefined() && def ? *def : a);
      }
      return value::make_list(std::move(out));
    }
    if (args.empty()) fail("map needs a filter name or attribute=");
    std::string f = need_string(args[0], "map");
    std::vector<value> rest(args.begin() + 1, args.end());
    for (const value& x : iterate(v)) out.push_back(filter_map_one(f, x, rest, kw, ctx));
    return value::make_list(std::move(out));
  }
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    bool by_attr = name == "selectattr" || name == "rejectattr";
    bool keep_if = name == "select" || name == "selectattr";
    size_t at = by_attr ? 1 : 0;
    if (by_attr && args.empty()) fail(name + " needs an attribute name");
    std::string test = args.size() > at ? need_string(args[at], name) : "";
    std::vector<value> targs(args.begin() + static_cast<std::ptrdiff_t>(std::min(args.size(), at + 1)), args.end());
    list out;
    for (const value& x : iterate(v)) {
      value subject = by_attr ? attribute_of(x, to_str(args[0])) : x;
      bool r = test.empty() ? truthy(subject) : apply_test(test, subject, targs, ctx);
      if (r == keep_if) out.push_back(x);
    }
    return value::make_list(std::move(out));
  }
  throw_error(errc::unsupported, "unsupported filter '" + name + "'");
}

std::unordered_map<std::string, value> builtin_globals() {
  std::unordered_map<std::string, value> g;
  g["range"] = value::make_callable("range", [](std::vector<value>& a, kwargs&) {
    if (a.empty() || a.size() > 3) fail("range() takes 1 to 3 arguments");
    int64_t start = 0, stop, step = 1;
    if (a.size() == 1) {
      stop = need_int(a[0], "range");
    } else {
      start = need_int(a[0], "range");
      stop = need_int(a[1], "range");
      if (a.size() == 3) step = need_int(a[2], "range");
    }
    if (step == 0) fail("range() step must not be zero");
    list out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      if (out.size() >= 1000000) fail("range() longer than a million items");
      out.push_back(value(i));
    }
    return value::make_list(std::move(out));
  });
  auto make_mapping = [](bool ns) {
    return [ns](std::vector<value>& a, kwargs& kw) {
      value d = ns ? value::make_namespace() : value::make_dict();
      for (const value& x : a) {
        if (!x.is_dict()) fail("namespace()/dict() take a mapping or keyword arguments");
        for (const auto& [k, v] : x.as_dict().items) d.as_dict().set(k, v);
      }
      for (auto& [k, v] : kw) d.as_dict().set(k, v);
      return d;
    };
  };
  g["namespace"] = value::make_callable("namespace", make_mapping(true));
  g["dict"] = value::make_callable("dict", make_mapping(false));
  g["raise_exception"] = value::make_callable("raise_exception", [](std::vector<value>& a, kwargs&) -> value {
    throw_error(errc::invalid_input, "the chat template refused the input: " + (a.empty() ? std::string() : to_str(a[0])));
  });
  g["strftime_now"] = value::make_callable("strftime_now", [](std::vector<value>& a, kwargs&) {
    if (a.size() != 1) fail("strftime_now() takes a format");
    std::time_t t = std::time(nullptr);
    std::tm tm{};
    localtime_r(&t, &tm);
    char buf[256];
    size_t n = std::strftime(buf, sizeof buf, need_string(a[0], "strftime_now").c_str(), &tm);
    return value(std::string(buf, n));
  });
  return g;
}

}  // namespace troupe::jinja
