// The gateway broker: one actor multiplexing every client connection. It only frames, decodes,
// routes and writes; per-connection back-pressure keeps one slow or broken client from holding
// memory or time that others need. Two listeners feed it: the msgpack protocol (docs/protocol.md)
// and the OpenAI-compatible HTTP API (docs/openai_api.md), whose requests become the same
// generate requests and whose connections share every limit.
#include "actors/gateway.hpp"

#include <caf/actor_system.hpp>
#include <caf/io/broker.hpp>
#include <caf/io/middleman.hpp>
#include <caf/io/receive_policy.hpp>
#include <caf/io/system_messages.hpp>
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <optional>
#include <random>
#include <unordered_map>

#include "actors/messages.hpp"
#include "runtime/wire/event_codec.hpp"
#include "runtime/wire/frame.hpp"
#include "runtime/wire/http.hpp"
#include "runtime/wire/openai.hpp"
#include "runtime/wire/request_codec.hpp"

namespace troupe::actors {

namespace {

using caf::io::connection_handle;

// A running generate: its completions (n of them) are sequences first_rid .. first_rid + n - 1.
struct running_generate {
  int64_t first_rid = 0;
  int32_t n = 1;
  int32_t live = 1;  // completions whose last bytes have not come back yet
};

// An HTTP connection (the OpenAI-compatible API): requests are answered one at a time, in order.
struct http_conn {
  explicit http_conn(size_t max_body) : parser(16384, max_body) {}
  wire::http_request_parser parser;
  std::optional<wire::openai::response_builder> reply;  // the generate being answered
  std::string client_id;                                 // its id
  bool head_sent = false;                                // a streamed response has begun
  bool keep_alive = true;
  bool pumping = false;  // http_pump is on the stack: a response that ends inside it needs no second pump
};

struct conn_state {
  explicit conn_state(uint32_t max_frame) : decoder(max_frame) {}
  wire::frame_decoder decoder;
  std::unique_ptr<http_conn> http;  // set: an HTTP connection; its bytes never reach `decoder`
  std::unordered_map<std::string, running_generate> generates;  // by client id, running only
  int32_t running_seqs = 0;  // completions of those (what max_requests_per_connection bounds)
  uint64_t unsent_bytes = 0;  // written but not yet on the wire (as the scribe last reported)
  bool paused = false;        // reading stopped until the client drains its output
  int32_t other_requests = 0;  // tokenize requests in flight (answered later)
  clock::time_point quiet_since = clock::now();  // the last complete frame or the last request's end
};

struct route {
  connection_handle hdl;
  std::string client_id;
  int32_t worker = 0;
  bool generate = false;
  int32_t index = -1;  // a completion of a generate with n > 1
};

struct gateway_state {
  static inline const char* name = "troupe.gateway";
  context_ptr ctx;
  std::vector<caf::actor> workers;
  std::unordered_map<connection_handle, conn_state> conns;
  std::unordered_map<int64_t, route> routes;
  int64_t next_rid = 1;
  bool draining = false;
  size_t drained_workers = 0;
  caf::actor drain_listener;
  caf::io::accept_handle doorman;
  caf::io::accept_handle http_doorman;  // valid when [server] http_port >= 0
  uint16_t http_port = 0;
  std::string http_id_prefix;           // random per server, so response ids differ across replicas
  uint64_t next_http_id = 0;
};

using self_ptr = caf::io::stateful_broker<gateway_state>*;

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

void write_bytes(self_ptr self, connection_handle hdl, const std::string& bytes) {
  auto& st = self->state;
  auto c = st.conns.find(hdl);
  if (c == st.conns.end() || bytes.empty()) return;
  self->write(hdl, bytes.size(), bytes.data());
  self->flush(hdl);
  c->second.unsent_bytes += bytes.size();
}

void http_deliver(self_ptr self, connection_handle hdl, const std::string& client_id, const wire::event& e);

void write_event(self_ptr self, connection_handle hdl, const wire::event& e) {
  auto c = self->state.conns.find(hdl);
  if (c != self->state.conns.end() && c->second.http)
    return http_deliver(self, hdl, std::visit([](const auto& x) -> const std::string& { return x.id; }, e), e);
  std::string bytes;
  wire::append_event_frame(bytes, e);
  write_bytes(self, hdl, bytes);
}

void write_error(self_ptr self, connection_handle hdl, wire::error_code code, std::string msg, std::string id) {
  write_event(self, hdl, wire::wire_error{code, std::move(msg), std::move(id)});
}

// Cancels every running request of a connection (disconnect, stuck client, frame too large).
void cancel_all(self_ptr self, connection_handle hdl) {
  auto& st = self->state;
  for (auto it = st.routes.begin(); it != st.routes.end();) {
    if (it->second.hdl == hdl) {
      if (it->second.generate) self->send(st.workers[static_cast<size_t>(it->second.worker)], cancel_msg{it->first});
      it = st.routes.erase(it);
    } else {
      ++it;
    }
  }
}

// A completion's (or a tokenize's) last bytes went out: the request id is free again once all of
// its completions did, and the connection's quiet time starts anew.
void completion_ended(self_ptr self, const route& r) {
  auto c = self->state.conns.find(r.hdl);
  if (c == self->state.conns.end()) return;
  auto& cs = c->second;
  cs.quiet_since = clock::now();
  if (!r.generate) {
    --cs.other_requests;
    return;
  }
  --cs.running_seqs;
  auto g = cs.generates.find(r.client_id);
  if (g != cs.generates.end() && --g->second.live == 0) cs.generates.erase(g);
}

void drop_connection(self_ptr self, connection_handle hdl, bool close_socket) {
  cancel_all(self, hdl);
  self->state.conns.erase(hdl);
  self->state.ctx->metrics->set_client_connections(static_cast<int64_t>(self->state.conns.size()));
  if (close_socket) self->close(hdl);
}

// Pauses reading above half the output budget; a client above the whole budget is stuck.
void apply_backpressure(self_ptr self, connection_handle hdl) {
  auto& st = self->state;
  auto c = st.conns.find(hdl);
  if (c == st.conns.end()) return;
  auto limit = static_cast<uint64_t>(st.ctx->cfg.max_connection_buffer_bytes);
  auto& cs = c->second;
  if (cs.unsent_bytes > limit) {
    std::fprintf(stderr, "troupe serve: a client has %llu unread bytes (limit %llu): cancelling its requests\n",
                 static_cast<unsigned long long>(cs.unsent_bytes), static_cast<unsigned long long>(limit));
    drop_connection(self, hdl, true);
  } else if (!cs.paused && cs.unsent_bytes > limit / 2) {
    cs.paused = true;
    self->halt(hdl);
  } else if (cs.paused && cs.unsent_bytes <= limit / 4) {
    cs.paused = false;
    self->trigger(hdl);
  }
}

// Compares a secret in time that does not depend on where `given` first differs from `want`
// (non-empty).
bool same_secret(std::string_view given, const std::string& want) {
  unsigned diff = want.size() != given.size();
  for (size_t i = 0; i < given.size(); ++i) diff |= static_cast<unsigned>(given[i] ^ want[i % want.size()]);
  return diff == 0;
}

// Admin: swap the scheduling policy (docs/plugins.md). Only with the server's admin token; the
// scheduler loads and installs it between two steps and answers through the worker it delegates to.
void on_set_policy(self_ptr self, connection_handle hdl, wire::set_policy_request&& r) {
  auto& st = self->state;
  const auto& want = st.ctx->cfg.admin_token;
  if (want.empty())
    return write_error(self, hdl, wire::error_code::forbidden,
                       "admin requests are disabled on this server (set [server] admin_token to enable them)", r.id);
  if (!same_secret(r.token, want)) return write_error(self, hdl, wire::error_code::forbidden, "wrong admin token", r.id);
  std::string id = r.id;
  self->request(st.workers.at(0), std::chrono::seconds(60), set_policy_msg{std::move(r.policy), std::move(r.config)})
      .then(
          [=](set_policy_reply& rep) {
            if (rep.ok) return write_event(self, hdl, wire::policy_event{id, rep.policy, rep.previous});
            write_error(self, hdl, wire::error_code::invalid_value, rep.error, id);
          },
          [=](caf::error& e) {
            write_error(self, hdl, wire::error_code::internal,
                        "the scheduler did not answer the set_policy request: " + self->system().render(e), id);
          });
}

void on_request(self_ptr self, connection_handle hdl, wire::request&& req) {
  auto& st = self->state;
  auto& cs = st.conns.at(hdl);
  const auto& id = wire::request_id(req);
  if (auto* g = std::get_if<wire::generate_request>(&req)) {
    if (st.draining) return write_error(self, hdl, wire::error_code::shutting_down, "the server is shutting down", id);
    if (cs.generates.count(id))
      return write_error(self, hdl, wire::error_code::duplicate_id,
                         "request id '" + id + "' is already running on this connection", id);
    // Each completion (n > 1) is a sequence of its own and counts against the connection's limit.
    if (cs.running_seqs + g->n > st.ctx->cfg.max_requests_per_connection)
      return write_error(self, hdl, wire::error_code::too_many_requests,
                         "this connection already has " + std::to_string(cs.running_seqs) +
                             " sequences running and this request asks for " + std::to_string(g->n) +
                             " (max_requests_per_connection is " +
                             std::to_string(st.ctx->cfg.max_requests_per_connection) + ")",
                         id);
    // One worker builds the request once and submits its n completions as sequences rid .. rid + n - 1.
    int64_t rid = st.next_rid;
    st.next_rid += g->n;
    auto w = static_cast<int32_t>(rid % static_cast<int64_t>(st.workers.size()));
    cs.generates.emplace(id, running_generate{rid, g->n, g->n});
    cs.running_seqs += g->n;
    for (int32_t i = 0; i < g->n; ++i) st.routes.emplace(rid + i, route{hdl, id, w, true, g->n > 1 ? i : -1});
    self->send(st.workers[static_cast<size_t>(w)],
               generate_msg{rid, std::make_shared<const wire::generate_request>(std::move(*g)), clock::now()});
  } else if (auto* c = std::get_if<wire::cancel_request>(&req)) {
    auto it = cs.generates.find(c->id);
    if (it == cs.generates.end())
      return write_error(self, hdl, wire::error_code::unknown_id,
                         "no request with id '" + c->id + "' is running on this connection", c->id);
    for (int64_t rid = it->second.first_rid; rid < it->second.first_rid + it->second.n; ++rid) {
      auto r = st.routes.find(rid);
      if (r != st.routes.end()) self->send(st.workers[static_cast<size_t>(r->second.worker)], cancel_msg{rid});
    }
  } else if (auto* t = std::get_if<wire::tokenize_request>(&req)) {
    int64_t rid = st.next_rid++;
    auto w = static_cast<int32_t>(rid % static_cast<int64_t>(st.workers.size()));
    st.routes.emplace(rid, route{hdl, id, w, false});
    ++cs.other_requests;
    self->send(st.workers[static_cast<size_t>(w)],
               tokenize_msg{rid, std::make_shared<const wire::tokenize_request>(std::move(*t))});
  } else if (std::holds_alternative<wire::health_request>(req)) {
    write_event(self, hdl,
                wire::health_event{id, st.draining ? "draining" : "ok", st.ctx->metrics->running(),
                                   st.ctx->metrics->waiting()});
  } else if (auto* sp = std::get_if<wire::set_policy_request>(&req)) {
    on_set_policy(self, hdl, std::move(*sp));
  } else if (std::holds_alternative<wire::models_request>(req)) {
    const auto& f = st.ctx->facts;
    wire::models_event e{id, {{f.name, f.max_model_len, f.vocab_size, {}}}};
    for (const auto& a : f.adapters) e.models.push_back({a.name, f.max_model_len, f.vocab_size, f.name});
    write_event(self, hdl, std::move(e));
  } else {
    write_error(self, hdl, wire::error_code::unsupported,
                "request type '" + std::string(wire::request_type(req)) + "' is not served by this server", id);
  }
}

void on_http_data(self_ptr self, connection_handle hdl, const std::vector<char>& buf);

void on_data(self_ptr self, connection_handle hdl, const std::vector<char>& buf) {
  auto& st = self->state;
  auto c = st.conns.find(hdl);
  if (c == st.conns.end()) return;
  if (c->second.http) return on_http_data(self, hdl, buf);
  c->second.decoder.feed(std::string_view(buf.data(), buf.size()));
  std::string payload;
  for (;;) {
    auto s = c->second.decoder.next(payload);
    if (s == wire::frame_decoder::status::need_more) break;
    if (s == wire::frame_decoder::status::too_large) {
      write_error(self, hdl, wire::error_code::frame_too_large,
                  "frame of " + std::to_string(c->second.decoder.declared_bytes()) + " bytes exceeds max_frame_bytes (" +
                      std::to_string(c->second.decoder.max_frame_bytes()) + "); closing the connection",
                  "");
      drop_connection(self, hdl, true);
      return;
    }
    c->second.quiet_since = clock::now();
    auto d = wire::decode_request(payload);
    if (!d.ok()) {
      write_error(self, hdl, d.error.code, d.error.message, d.error.id);
      continue;
    }
    on_request(self, hdl, std::move(*d.req));
    c = st.conns.find(hdl);  // on_request never drops the connection, but stay safe
    if (c == st.conns.end()) return;
  }
  apply_backpressure(self, hdl);
}

// ---- the OpenAI-compatible HTTP API (docs/openai_api.md) -------------------------------------

void http_write(self_ptr self, connection_handle hdl, const std::string& bytes) { write_bytes(self, hdl, bytes); }

// A whole response outside a generate (models, health, errors); closes when the client asked to.
void http_answer(self_ptr self, connection_handle hdl, int status, std::string_view type, const std::string& body,
                 bool keep_alive) {
  http_write(self, hdl, wire::http_response(status, type, body, keep_alive));
  if (!keep_alive) drop_connection(self, hdl, true);
}

void http_answer_error(self_ptr self, connection_handle hdl, const wire::openai::api_error& e, bool keep_alive) {
  http_answer(self, hdl, e.status, "application/json", wire::openai::error_body(e), keep_alive);
}

void http_pump(self_ptr self, connection_handle hdl);

// The response to the connection's generate is complete: its other completions (an error ended it
// early) are cancelled, and the next pipelined request may start.
void http_finished(self_ptr self, connection_handle hdl) {
  auto& st = self->state;
  auto c = st.conns.find(hdl);
  if (c == st.conns.end()) return;
  auto& h = *c->second.http;
  const bool keep_alive = h.keep_alive;
  const std::string id = h.client_id;
  h.reply.reset();
  h.client_id.clear();
  for (const auto& [rid, r] : st.routes)
    if (r.hdl == hdl && r.generate && r.client_id == id) self->send(st.workers[static_cast<size_t>(r.worker)], cancel_msg{rid});
  if (!keep_alive) return drop_connection(self, hdl, true);
  http_pump(self, hdl);
}

// One event of the connection's running generate, turned into its part of the OpenAI response.
void http_deliver(self_ptr self, connection_handle hdl, const std::string& client_id, const wire::event& e) {
  auto c = self->state.conns.find(hdl);
  if (c == self->state.conns.end()) return;
  auto& h = *c->second.http;
  if (!h.reply || client_id != h.client_id) return;  // a cancelled generate's last events
  std::string body, out;
  try {
    body = h.reply->feed(e);
  } catch (const std::exception& x) {  // never expected; one response fails, not the gateway
    std::fprintf(stderr, "troupe serve: cannot write an OpenAI response: %s; closing its connection\n", x.what());
    if (!h.head_sent)
      http_write(self, hdl,
                 wire::http_response(500, "application/json",
                                     wire::openai::error_body({500, x.what(), "internal", ""}), false));
    return drop_connection(self, hdl, true);
  }
  if (!h.head_sent) {
    if (h.reply->streaming() && !body.empty()) {
      out = wire::http_stream_head(200, "text/event-stream", h.keep_alive);
      h.head_sent = true;
    } else if (h.reply->complete()) {
      out = wire::http_response(h.reply->status(), "application/json", body, h.keep_alive);
    }
  }
  if (h.head_sent) {
    wire::append_http_chunk(out, body);
    if (h.reply->complete()) wire::append_http_last_chunk(out);
  }
  http_write(self, hdl, out);
  if (h.reply->complete()) http_finished(self, hdl);
}

// The worker's framed events for an HTTP connection's generate.
void http_deliver_frames(self_ptr self, connection_handle hdl, const std::string& client_id, const std::string& bytes) {
  wire::frame_decoder frames(UINT32_MAX);
  frames.feed(bytes);
  std::string payload;
  while (frames.next(payload) == wire::frame_decoder::status::frame) {
    auto d = wire::decode_event(payload);
    if (d.ok()) http_deliver(self, hdl, client_id, *d.ev);
  }
}

wire::openai::served_models served_models(const server_context& ctx) {
  wire::openai::served_models m{ctx.facts.name, {}, ctx.facts.max_model_len};
  for (const auto& a : ctx.facts.adapters) m.adapters.push_back(a.name);
  return m;
}

void on_http_request(self_ptr self, connection_handle hdl, wire::http_request&& req) {
  auto& st = self->state;
  auto& h = *st.conns.at(hdl).http;
  h.keep_alive = req.keep_alive;
  const auto path = req.path();
  const bool chat = path == "/v1/chat/completions", completion = path == "/v1/completions";
  auto not_allowed = [&](const char* method) {
    http_answer_error(self, hdl,
                      {405, "use " + std::string(method) + " for " + std::string(path), "method_not_allowed", ""},
                      req.keep_alive);
  };
  if (const auto& key = st.ctx->cfg.api_key; !key.empty() && path.rfind("/v1/", 0) == 0) {
    const std::string* auth = req.header("authorization");
    constexpr std::string_view bearer = "Bearer ";
    if (!auth || auth->compare(0, bearer.size(), bearer) != 0 ||
        !same_secret(std::string_view(*auth).substr(bearer.size()), key))
      return http_answer_error(self, hdl,
                               {401, auth ? "wrong API key" : "this server needs an API key: 'Authorization: Bearer KEY'",
                                "invalid_api_key", ""},
                               req.keep_alive);
  }
  if (path == "/v1/models") {
    if (req.method != "GET") return not_allowed("GET");
    return http_answer(self, hdl, 200, "application/json",
                       wire::openai::models_body(served_models(*st.ctx), static_cast<int64_t>(std::time(nullptr))),
                       req.keep_alive);
  }
  if (path == "/metrics") {  // where vLLM serves it, so its scrape configs work unchanged
    if (req.method != "GET") return not_allowed("GET");
    return http_answer(self, hdl, 200, "text/plain; version=0.0.4; charset=utf-8", st.ctx->metrics->render(),
                       req.keep_alive);
  }
  if (path == "/health") {
    if (req.method != "GET") return not_allowed("GET");
    return http_answer(self, hdl, st.draining ? 503 : 200, "application/json",
                       st.draining ? R"({"status": "draining"})" : R"({"status": "ok"})", req.keep_alive);
  }
  if (!chat && !completion)
    return http_answer_error(self, hdl,
                             {404, "no endpoint " + std::string(path) +
                                       " (served: POST /v1/chat/completions, POST /v1/completions, GET /v1/models, GET /health, GET /metrics)",
                              "not_found", ""},
                             req.keep_alive);
  if (req.method != "POST") return not_allowed("POST");
  const auto ep = chat ? wire::openai::endpoint::chat : wire::openai::endpoint::completion;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(++st.next_http_id));
  const std::string id = (chat ? "chatcmpl-" : "cmpl-") + st.http_id_prefix + hex;
  auto parsed = wire::openai::parse_request(ep, req.body, served_models(*st.ctx), id);
  if (!parsed.ok()) return http_answer_error(self, hdl, parsed.error, req.keep_alive);
  const tokenizer* tok = st.ctx->tok.get();
  h.reply.emplace(ep, parsed, static_cast<int64_t>(std::time(nullptr)), [tok](int32_t t) {
    if (!tok) return "token_id:" + std::to_string(t);
    try {
      return std::string(tok->token_bytes(t));
    } catch (const std::exception&) {
      return std::string();
    }
  });
  if (parsed.echo) {  // the prompt as text and as ids, whichever form it came in
    const auto& g = *parsed.req;
    std::vector<int32_t> ids = g.prompt_ids;
    std::string text = g.prompt;
    try {
      if (tok && g.kind == wire::prompt_kind::ids) text = tok->decode(ids);
      if (tok && g.kind == wire::prompt_kind::text) ids = tok->encode(text);
    } catch (const std::exception&) {  // ids past the vocabulary: the request fails with its own error
    }
    h.reply->set_echo_prompt(std::move(text), std::move(ids));
  }
  h.client_id = id;
  h.head_sent = false;
  on_request(self, hdl, wire::request{std::move(*parsed.req)});
}

// Starts the connection's next complete request unless one is being answered. Requests answered
// at once (refused while draining, say) loop here instead of recursing through http_finished, so
// a thousand pipelined ones cannot exhaust the stack.
void http_pump(self_ptr self, connection_handle hdl) {
  {
    auto c = self->state.conns.find(hdl);
    if (c == self->state.conns.end() || c->second.http->pumping) return;
    c->second.http->pumping = true;
  }
  struct unmark {
    self_ptr self;
    connection_handle hdl;
    ~unmark() {
      auto c = self->state.conns.find(hdl);
      if (c != self->state.conns.end()) c->second.http->pumping = false;
    }
  } guard{self, hdl};
  for (;;) {
    auto c = self->state.conns.find(hdl);
    if (c == self->state.conns.end() || c->second.http->reply) return;
    auto& h = *c->second.http;
    wire::http_request req;
    switch (h.parser.next(req)) {
      case wire::http_request_parser::status::need_more: return;
      case wire::http_request_parser::status::send_continue:
        http_write(self, hdl, "HTTP/1.1 100 Continue\r\n\r\n");
        continue;
      case wire::http_request_parser::status::error:
        return http_answer_error(self, hdl,
                                 {h.parser.error_status(), h.parser.error_message(),
                                  h.parser.error_status() == 413 ? "frame_too_large" : "malformed", ""},
                                 false);
      case wire::http_request_parser::status::request:
        c->second.quiet_since = clock::now();
        on_http_request(self, hdl, std::move(req));
        continue;
    }
  }
}

void on_http_data(self_ptr self, connection_handle hdl, const std::vector<char>& buf) {
  auto c = self->state.conns.find(hdl);
  if (c == self->state.conns.end()) return;
  auto& h = *c->second.http;
  h.parser.feed(std::string_view(buf.data(), buf.size()));
  // Requests pipelined behind a running one wait in the parser; more than one frame's worth is
  // not a client waiting for its answer.
  if (h.reply && h.parser.buffered_bytes() > static_cast<size_t>(self->state.ctx->cfg.max_frame_bytes) + 16384) {
    std::fprintf(stderr, "troupe serve: an HTTP client pipelined more than max_frame_bytes behind a running request: closing it\n");
    return drop_connection(self, hdl, true);
  }
  http_pump(self, hdl);
  apply_backpressure(self, hdl);
}

// Closes the connections that have had nothing running and sent no complete frame for
// idle_timeout_ms, telling them why; then looks again in a quarter of that, between 10 ms and 1 s
// (a connection is closed at most that late).
void sweep_idle(self_ptr self) {
  auto& st = self->state;
  const auto timeout = std::chrono::milliseconds(st.ctx->cfg.idle_timeout_ms);
  const auto now = clock::now();
  std::vector<connection_handle> idle;
  for (const auto& [hdl, cs] : st.conns)
    if (cs.running_seqs == 0 && cs.other_requests == 0 && now - cs.quiet_since >= timeout) idle.push_back(hdl);
  for (auto hdl : idle) {
    if (st.conns.at(hdl).http) {  // an idle HTTP keep-alive connection closes without a word
      drop_connection(self, hdl, true);
      continue;
    }
    write_error(self, hdl, wire::error_code::idle_timeout,
                "no request for " + std::to_string(st.ctx->cfg.idle_timeout_ms) +
                    " ms (idle_timeout_ms); closing the connection",
                "");
    drop_connection(self, hdl, true);
  }
  st.ctx->metrics->add_idle_closed(static_cast<int64_t>(idle.size()));
  self->delayed_send(self, std::clamp(timeout / 4, std::chrono::milliseconds(10), std::chrono::milliseconds(1000)),
                     idle_sweep_atom::value);
}

caf::behavior gateway(self_ptr self, context_ptr ctx, std::vector<caf::actor> workers,
                      std::promise<bind_result>* bound) {
  auto& st = self->state;
  st.ctx = ctx;
  st.workers = std::move(workers);
  auto res = listen_on(self, ctx->cfg, ctx->cfg.port, "", bound);
  if (!res) return {};
  st.doorman = res->first;
  if (ctx->cfg.http_port >= 0) {
    auto h = listen_on(self, ctx->cfg, ctx->cfg.http_port, " for the OpenAI-compatible API", bound);
    if (!h) return {};
    st.http_doorman = h->first;
    st.http_port = h->second;
    std::random_device rd;
    char hex[9];
    std::snprintf(hex, sizeof hex, "%08x", static_cast<unsigned>(rd()));
    st.http_id_prefix = hex;
  }
  bound->set_value({res->second, {}, st.http_port});
  if (ctx->cfg.idle_timeout_ms > 0) sweep_idle(self);
  return {
      [=](const caf::io::new_connection_msg& m) {
        auto& st = self->state;
        const bool http = m.source == st.http_doorman;
        if (static_cast<int32_t>(st.conns.size()) >= st.ctx->cfg.max_connections || st.draining) {
          std::string bytes;
          if (http) {
            wire::openai::api_error e{st.draining ? 503 : 429,
                                      st.draining ? "the server is shutting down" : "the server has max_connections clients",
                                      st.draining ? "shutting_down" : "too_many_requests", ""};
            bytes = wire::http_response(e.status, "application/json", wire::openai::error_body(e), false);
          } else {
          wire::append_event_frame(bytes, wire::wire_error{st.draining ? wire::error_code::shutting_down
                                                                       : wire::error_code::too_many_requests,
                                                           st.draining ? "the server is shutting down"
                                                                       : "the server has max_connections clients",
                                                           ""});
          }
          self->write(m.handle, bytes.size(), bytes.data());
          self->flush(m.handle);
          self->close(m.handle);
          return;
        }
        auto& cs = st.conns.emplace(m.handle, conn_state(static_cast<uint32_t>(st.ctx->cfg.max_frame_bytes))).first->second;
        if (http) cs.http = std::make_unique<http_conn>(static_cast<size_t>(st.ctx->cfg.max_frame_bytes));
        st.ctx->metrics->set_client_connections(static_cast<int64_t>(st.conns.size()));
        self->configure_read(m.handle, caf::io::receive_policy::at_most(64 * 1024));
        self->ack_writes(m.handle, true);
      },
      [=](const caf::io::new_data_msg& m) { on_data(self, m.handle, m.buf); },
      [=](const caf::io::data_transferred_msg& m) {
        auto c = self->state.conns.find(m.handle);
        if (c == self->state.conns.end()) return;
        c->second.unsent_bytes = m.remaining;
        apply_backpressure(self, m.handle);
      },
      [=](const caf::io::connection_closed_msg& m) { drop_connection(self, m.handle, false); },
      [=](const caf::io::acceptor_closed_msg&) {},
      [=](idle_sweep_atom) { sweep_idle(self); },
      [=](output_msg& m) {
        auto& st = self->state;
        std::vector<connection_handle> touched;
        for (auto& item : m.items) {
          auto r = st.routes.find(item.rid);
          if (r == st.routes.end()) continue;  // the client left
          const route rt = r->second;
          if (item.final) {
            completion_ended(self, rt);
            st.routes.erase(r);
          }
          // An HTTP response may end here and start the connection's next request (new routes).
          auto c = st.conns.find(rt.hdl);
          if (c != st.conns.end() && c->second.http)
            http_deliver_frames(self, rt.hdl, rt.client_id, item.bytes);
          else
            write_bytes(self, rt.hdl, item.bytes);
          touched.push_back(rt.hdl);
        }
        for (auto hdl : touched) apply_backpressure(self, hdl);
      },
      [=](drain_atom) {
        auto& st = self->state;
        st.draining = true;
        st.drain_listener = caf::actor_cast<caf::actor>(self->current_sender());
        self->close(st.doorman);
        if (st.ctx->cfg.http_port >= 0) self->close(st.http_doorman);
      },
      [=](drained_atom) {
        // One marker per worker, each behind that worker's last output (see scheduler_actor.cpp):
        // with all of them every `done` is written; close the connections once they are sent.
        auto& st = self->state;
        if (++st.drained_workers < st.workers.size()) return;
        for (auto& [hdl, cs] : st.conns) self->close(hdl);
        st.conns.clear();
        st.ctx->metrics->set_client_connections(0);
        st.routes.clear();
        if (st.drain_listener) self->send(st.drain_listener, drained_atom::value);
      },
      [=](worker_changed& m) {
        // The worker's requests died with it: end each with a reason, and make sure the
        // scheduler forgets them (the cancel goes through the new worker).
        auto& st = self->state;
        st.workers.at(static_cast<size_t>(m.index)) = m.worker;
        // Taken out of the routes first: answering an HTTP request may start the connection's
        // next one, which adds routes.
        std::vector<std::pair<int64_t, route>> gone;
        for (auto it = st.routes.begin(); it != st.routes.end();) {
          if (it->second.worker != m.index) {
            ++it;
            continue;
          }
          gone.emplace_back(it->first, it->second);
          it = st.routes.erase(it);
        }
        for (const auto& [rid, r] : gone) {
          wire::wire_error lost{wire::error_code::internal,
                                "the tokenizer worker failed and was restarted; this request was lost", r.client_id};
          completion_ended(self, r);
          if (r.generate) {
            wire::done_event d;
            d.id = r.client_id;
            d.reason = wire::finish_reason::error;
            d.error = lost;
            if (r.index >= 0) d.index = r.index;
            self->send(m.worker, cancel_msg{rid});
            write_event(self, r.hdl, d);
          } else {
            write_event(self, r.hdl, lost);
          }
        }
      },
  };
}

// ---- metrics endpoint ------------------------------------------------------------------------

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

caf::actor spawn_gateway(caf::actor_system& sys, context_ptr ctx, std::vector<caf::actor> workers,
                         std::promise<bind_result>* bound) {
  return sys.middleman().spawn_broker(gateway, std::move(ctx), std::move(workers), bound);
}

caf::actor spawn_metrics_http(caf::actor_system& sys, context_ptr ctx, std::promise<bind_result>* bound) {
  return sys.middleman().spawn_broker(metrics_http, std::move(ctx), bound);
}

}  // namespace troupe::actors
