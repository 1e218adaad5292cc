// JSON text -> nlohmann::ordered_json in linear time. ordered_json::parse inserts each key with
// a linear search of the keys before it, so an object of n keys costs n^2/2 string compares:
// 80,000 keys (a 1 MiB request's tools) took 19.6 s in one tokenizer worker. This builder
// appends pairs and finds duplicate keys with a hash set instead.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace troupe {

// Throws nlohmann::json::parse_error for text that is not JSON, and std::invalid_argument for
// an object with a key twice (JSON does not define which one wins; the wire refuses them too).
nlohmann::ordered_json parse_json_in_order(std::string_view text);

// Appends (key, value) to an object without ordered_map's search of the keys before it; the
// caller has made sure the key is new (with a hash set). Returns the stored value.
nlohmann::ordered_json& append_member(nlohmann::ordered_json& object, std::string key, nlohmann::ordered_json value);

}  // namespace troupe
