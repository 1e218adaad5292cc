// Internal to runtime/wire: free-form msgpack values (tool definitions, tool-call arguments) as
// JSON text, the form the chat template and clients use, and back. Key order is kept: the chat
// template prints tools as given, and a reordered schema would change the prompt.
#pragma once

#include <string>
#include <string_view>

#include "runtime/wire/msgpack_util.hpp"

namespace troupe::wire::detail {

// JSON text of `o`. Throws std::invalid_argument naming `where` (a field path such as
// "tools[0].function.parameters") for what JSON cannot hold: binary and ext values, non-string
// or duplicate map keys, invalid UTF-8, NaN or infinite floats.
std::string to_json_text(const msgpack::object& o, const std::string& where);

// Appends JSON text (as to_json_text writes it) to `sink` as msgpack; integers stay integers,
// floats are float64. Throws nlohmann::json::parse_error for text that is not JSON.
void pack_json_text(string_sink& sink, std::string_view json_text);

}  // namespace troupe::wire::detail
