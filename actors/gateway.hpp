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
};

// The client gateway: accepts TCP connections, decodes request frames, routes requests to the
// tokenizer workers, writes their events back, enforces the per-connection limits.
caf::actor spawn_gateway(caf::actor_system& sys, context_ptr ctx, std::vector<caf::actor> workers,
                         std::promise<bind_result>* bound);

// GET /metrics (Prometheus text) and GET /health over HTTP/1.1.
caf::actor spawn_metrics_http(caf::actor_system& sys, context_ptr ctx, std::promise<bind_result>* bound);

}  // namespace troupe::actors
