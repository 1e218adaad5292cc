#include "runtime/wire/json_msgpack.hpp"

#include <cmath>
#include <stdexcept>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "runtime/core/json_in_order.hpp"
#include "runtime/wire/utf8.hpp"

namespace troupe::wire::detail {

namespace {

using ordered_json = nlohmann::ordered_json;

[[noreturn]] void refuse(const std::string& where, const std::string& what) {
  throw std::invalid_argument("field '" + where + "' " + what);
}

ordered_json to_json(const msgpack::object& o, const std::string& where) {
  switch (o.type) {
    case msgpack::type::NIL: return nullptr;
    case msgpack::type::BOOLEAN: return o.via.boolean;
    case msgpack::type::POSITIVE_INTEGER: return o.via.u64;
    case msgpack::type::NEGATIVE_INTEGER: return o.via.i64;
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64:
      if (!std::isfinite(o.via.f64)) refuse(where, "is not a finite number (JSON has no NaN or infinity)");
      return o.via.f64;
    case msgpack::type::STR:
      if (!is_valid_utf8(as_view(o))) refuse(where, "is not valid UTF-8");
      return std::string(as_view(o));
    case msgpack::type::ARRAY: {
      ordered_json a = ordered_json::array();
      for (uint32_t i = 0; i < o.via.array.size; ++i)
        a.push_back(to_json(o.via.array.ptr[i], where + "[" + std::to_string(i) + "]"));
      return a;
    }
    case msgpack::type::MAP: {
      // ordered_json looks keys up by linear search (contains, operator[]): a 550 KB map of
      // distinct keys took 30 s. Duplicates are found with a set and pairs appended directly.
      ordered_json m = ordered_json::object();
      std::unordered_set<std::string_view> seen;
      for (uint32_t i = 0; i < o.via.map.size; ++i) {
        const auto& kv = o.via.map.ptr[i];
        if (kv.key.type != msgpack::type::STR) refuse(where, "has a key of type " + std::string(type_name(kv.key)) + "; JSON keys are strings");
        const std::string_view key = as_view(kv.key);
        if (!is_valid_utf8(key)) refuse(where, "has a key that is not valid UTF-8");
        if (!seen.insert(key).second) refuse(where, "has key '" + std::string(key) + "' twice");
        append_member(m, std::string(key), to_json(kv.val, where + "." + std::string(key)));
      }
      return m;
    }
    default: refuse(where, "is a " + std::string(type_name(o)) + " value, which JSON cannot hold");
  }
}

void pack(string_sink& sink, packer& pk, const ordered_json& j) {
  switch (j.type()) {
    case ordered_json::value_t::null: pk.pack_nil(); break;
    case ordered_json::value_t::boolean: j.get<bool>() ? pk.pack_true() : pk.pack_false(); break;
    case ordered_json::value_t::number_unsigned: pk.pack(j.get<uint64_t>()); break;
    case ordered_json::value_t::number_integer: pk.pack(j.get<int64_t>()); break;
    case ordered_json::value_t::number_float: pack_f64(sink, j.get<double>()); break;
    case ordered_json::value_t::string: pack_str(pk, j.get_ref<const std::string&>()); break;
    case ordered_json::value_t::array:
      pk.pack_array(static_cast<uint32_t>(j.size()));
      for (const auto& e : j) pack(sink, pk, e);
      break;
    case ordered_json::value_t::object:
      pk.pack_map(static_cast<uint32_t>(j.size()));
      for (const auto& [k, v] : j.items()) {
        pack_str(pk, k);
        pack(sink, pk, v);
      }
      break;
    default: throw std::invalid_argument("pack_json_text: a JSON value msgpack cannot hold");
  }
}

}  // namespace

std::string to_json_text(const msgpack::object& o, const std::string& where) { return to_json(o, where).dump(); }

void pack_json_text(string_sink& sink, std::string_view json_text) {
  packer pk(sink);
  pack(sink, pk, parse_json_in_order(json_text));
}

}  // namespace troupe::wire::detail
