// Opening a listening socket from a CAF broker, with the error every listener of `troupe serve`
// reports the same way.
#pragma once

#include <caf/io/broker.hpp>
#include <future>
#include <optional>
#include <string>
#include <utility>

#include "actors/gateway.hpp"
#include "runtime/serve/server_config.hpp"

namespace troupe::actors {

// Listens on [server] host:`port`; when it cannot, tells `bound` why (`what` names the listener)
// and quits the broker.
template <class Self>
std::optional<std::pair<caf::io::accept_handle, uint16_t>> listen_on(Self* self, const serve::server_config& cfg,
                                                                     int32_t port, const std::string& what,
                                                                     std::promise<bind_result>* bound) {
  auto res = self->add_tcp_doorman(static_cast<uint16_t>(port), cfg.host.c_str(), true);
  if (res) return std::make_pair(res->first, res->second);
  bound->set_value({0, "cannot listen on " + cfg.host + ":" + std::to_string(port) + what + ": " +
                           self->system().render(res.error())});
  self->quit();
  return std::nullopt;
}

}  // namespace troupe::actors
