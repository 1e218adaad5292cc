// Events (server -> client) between protocol.hpp structs and msgpack bytes. The server encodes;
// clients decode. Field order on the wire is fixed (docs/protocol.md), which the golden-bytes
// tests pin down.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "runtime/wire/protocol.hpp"

namespace troupe::wire {

// The payload of one event (no length prefix).
std::string encode_event(const event& e);
// Appends length prefix + payload to `out` (what the gateway writes to a socket).
void append_event_frame(std::string& out, const event& e);

struct decoded_event {
  std::optional<event> ev;
  std::string error;  // why the payload is not a valid event
  bool ok() const noexcept { return ev.has_value(); }
};

// Client side. Unknown fields are ignored (a newer server may add some); missing or mistyped
// required ones are an error.
decoded_event decode_event(std::string_view payload);

}  // namespace troupe::wire
