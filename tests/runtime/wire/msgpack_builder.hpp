// Test helper: builds msgpack payloads from a small value tree, including ones no valid client
// would send (raw bytes, wrong types, non-string keys).
#pragma once

#include <cstring>
#include <msgpack.hpp>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace troupe::wire::test {

struct raw { std::string bytes; };  // spliced in as-is
struct value;
using array = std::vector<value>;
using map = std::vector<std::pair<value, value>>;
struct value {
  std::variant<std::nullptr_t, bool, int64_t, uint64_t, double, std::string, array, map, raw> v;
  value(std::nullptr_t) : v(nullptr) {}
  value(bool b) : v(b) {}
  value(int i) : v(int64_t{i}) {}
  value(int64_t i) : v(i) {}
  value(uint64_t i) : v(i) {}
  value(double d) : v(d) {}
  value(const char* s) : v(std::string(s)) {}
  value(std::string s) : v(std::move(s)) {}
  value(array a) : v(std::move(a)) {}
  value(map m) : v(std::move(m)) {}
  value(raw r) : v(std::move(r)) {}
};

struct sink {
  std::string* out;
  void write(const char* p, size_t n) { out->append(p, n); }
};

inline void pack_value(msgpack::packer<sink>& pk, sink& out, const value& x) {
  std::visit([&](const auto& a) {
    using T = std::decay_t<decltype(a)>;
    if constexpr (std::is_same_v<T, std::nullptr_t>) pk.pack_nil();
    else if constexpr (std::is_same_v<T, array>) {
      pk.pack_array(static_cast<uint32_t>(a.size()));
      for (const auto& e : a) pack_value(pk, out, e);
    } else if constexpr (std::is_same_v<T, map>) {
      pk.pack_map(static_cast<uint32_t>(a.size()));
      for (const auto& [k, val] : a) { pack_value(pk, out, k); pack_value(pk, out, val); }
    } else if constexpr (std::is_same_v<T, raw>) {
      out.write(a.bytes.data(), a.bytes.size());
    } else if constexpr (std::is_same_v<T, std::string>) {
      pk.pack_str(static_cast<uint32_t>(a.size()));
      pk.pack_str_body(a.data(), static_cast<uint32_t>(a.size()));
    } else if constexpr (std::is_same_v<T, double>) {
      char buf[9];
      uint64_t bits;
      std::memcpy(&bits, &a, 8);
      buf[0] = static_cast<char>(0xcb);
      for (int i = 0; i < 8; ++i) buf[1 + i] = static_cast<char>(bits >> (56 - 8 * i));
      out.write(buf, 9);  // always float64, as real clients send floats
    } else {
      pk.pack(a);
    }
  }, x.v);
}

inline std::string pack(const value& x) {
  std::string out;
  sink s{&out};
  msgpack::packer<sink> pk(s);
  pack_value(pk, s, x);
  return out;
}

inline std::string hex(std::string_view s) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) { out += d[c >> 4]; out += d[c & 15]; out += ' '; }
  if (!out.empty()) out.pop_back();
  return out;
}

}  // namespace troupe::wire::test
