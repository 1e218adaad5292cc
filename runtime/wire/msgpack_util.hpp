// Internal to runtime/wire: the msgpack helpers the request and event codecs share.
#pragma once

#include <cstring>
#include <msgpack.hpp>
#include <string>
#include <string_view>

namespace troupe::wire::detail {

// msgpack::packer needs a stream with write(); this appends to a std::string.
struct string_sink {
  std::string* out;
  void write(const char* p, size_t n) { out->append(p, n); }
};
using packer = msgpack::packer<string_sink>;

inline void pack_str(packer& pk, std::string_view s) {
  pk.pack_str(static_cast<uint32_t>(s.size()));
  pk.pack_str_body(s.data(), static_cast<uint32_t>(s.size()));
}

// Always a float64 (0xcb): msgpack-c's pack_double() writes integral values as integers, but
// the protocol promises floats for float fields (timings, sampling values).
inline void pack_f64(string_sink& out, double d) {
  uint64_t bits;
  std::memcpy(&bits, &d, sizeof bits);
  char buf[9];
  buf[0] = static_cast<char>(0xcb);
  for (int i = 0; i < 8; ++i) buf[1 + i] = static_cast<char>(bits >> (56 - 8 * i));
  out.write(buf, 9);
}

// The wire name of a msgpack type, for error messages.
inline std::string_view type_name(const msgpack::object& o) {
  switch (o.type) {
    case msgpack::type::NIL: return "nil";
    case msgpack::type::BOOLEAN: return "bool";
    case msgpack::type::POSITIVE_INTEGER:
    case msgpack::type::NEGATIVE_INTEGER: return "integer";
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64: return "float";
    case msgpack::type::STR: return "string";
    case msgpack::type::BIN: return "binary";
    case msgpack::type::ARRAY: return "array";
    case msgpack::type::MAP: return "map";
    case msgpack::type::EXT: return "ext";
  }
  return "unknown";
}

inline std::string_view as_view(const msgpack::object& o) {
  return {o.via.str.ptr, o.via.str.size};
}

// Limits for untrusted input: no container may declare more elements than the frame has bytes
// (so a 10-byte frame cannot make the unpacker allocate gigabytes), nesting stays shallow:
// 32 levels leave room for tools' JSON schemas and bound every recursive walk of a value.
inline constexpr size_t max_nesting_depth = 32;
inline msgpack::unpack_limit limits_for(size_t payload_bytes) {
  size_t n = payload_bytes + 1;
  return msgpack::unpack_limit(n, n, n, n, n, max_nesting_depth);
}

}  // namespace troupe::wire::detail
