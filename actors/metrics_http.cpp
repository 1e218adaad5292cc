// GET /metrics (Prometheus text) and GET /health on the metrics port: a CAF broker that answers
// one request per connection.
#include <caf/actor_system.hpp>
#include <caf/io/middleman.hpp>
#include <caf/io/receive_policy.hpp>
#include <caf/io/system_messages.hpp>
#include <string>
#include <unordered_map>

#include "actors/listen.hpp"

namespace troupe::actors {

namespace {

using caf::io::connection_handle;

struct http_state {
  static inline const char* name = "troupe.metrics";
  context_ptr ctx;
  std::unordered_map<connection_handle, std::string> requests;
};

using http_ptr = caf::io::stateful_broker<http_state>*;

void http_reply(http_ptr self, connection_handle hdl, const char* status, const char* type, const std::string& body) {
  std::string r = std::string("HTTP/1.1 ") + status + "\r\nContent-Type: " + type +
                  "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
  self->write(hdl, r.size(), r.data());
  self->flush(hdl);
  self->close(hdl);
  self->state.requests.erase(hdl);
}

caf::behavior metrics_http(http_ptr self, context_ptr ctx, std::promise<bind_result>* bound) {
  self->state.ctx = ctx;
  auto res = listen_on(self, ctx->cfg, ctx->cfg.metrics_port, " for metrics", bound);
  if (!res) return {};
  bound->set_value({res->second, {}});
  return {
      [=](const caf::io::new_connection_msg& m) {
        self->state.requests[m.handle];
        self->configure_read(m.handle, caf::io::receive_policy::at_most(4096));
      },
      [=](const caf::io::new_data_msg& m) {
        auto& req = self->state.requests[m.handle];
        req.append(m.buf.data(), m.buf.size());
        if (req.size() > 16384) return http_reply(self, m.handle, "431 Request Header Fields Too Large", "text/plain", "");
        if (req.find("\r\n\r\n") == std::string::npos) return;
        auto line = req.substr(0, req.find("\r\n"));
        if (line.rfind("GET /metrics ", 0) == 0)
          return http_reply(self, m.handle, "200 OK", "text/plain; version=0.0.4; charset=utf-8",
                            self->state.ctx->metrics->render());
        if (line.rfind("GET /health ", 0) == 0) return http_reply(self, m.handle, "200 OK", "text/plain", "ok\n");
        http_reply(self, m.handle, "404 Not Found", "text/plain", "try GET /metrics\n");
      },
      [=](const caf::io::connection_closed_msg& m) { self->state.requests.erase(m.handle); },
      [=](const caf::io::acceptor_closed_msg&) {},
      [=](const caf::io::data_transferred_msg&) {},
  };
}

}  // namespace

caf::actor spawn_metrics_http(caf::actor_system& sys, context_ptr ctx, std::promise<bind_result>* bound) {
  return sys.middleman().spawn_broker(metrics_http, std::move(ctx), bound);
}

}  // namespace troupe::actors
