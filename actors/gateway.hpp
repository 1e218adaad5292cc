// Spawn functions of the two network actors (CAF brokers on loopback by default).
#pragma once

#include <caf/fwd.hpp>
#include <cstdint>
#include <future>
#include <string>
#include <vector>

#include "actors/context.hpp"

namespace troupe::actors {

// Result of binding a listening socket: the port, or why it failed.
struct bind_result {
  uint16_t port = 0;
  std::string error;
  uint16_t http_port = 0;  // the gateway's OpenAI-compatible API; 0 when [server] http_port is -1
};

// The client gateway: accepts TCP connections (msgpack frames on [server] port, the
// OpenAI-compatible HTTP API on http_port), decodes requests, routes them to the tokenizer
// workers, writes their events back, enforces the per-connection limits.
caf::actor spawn_gateway(caf::actor_system& sys, context_ptr ctx, std::vector<caf::actor> workers,
                         std::promise<bind_result>* bound);

// GET /metrics (Prometheus text) and GET /health over HTTP/1.1.
caf::actor spawn_metrics_http(caf::actor_system& sys, context_ptr ctx, std::promise<bind_result>* bound);

}  // namespace troupe::actors
