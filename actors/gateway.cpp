// The gateway broker: one actor multiplexing every client connection. It only frames, decodes,
// routes and writes; per-connection back-pressure keeps one slow or broken client from holding
// memory or time that others need. Two listeners feed it: the msgpack protocol (docs/protocol.md,
// here) and the OpenAI-compatible HTTP API (docs/openai_api.md, gateway_openai.cpp), whose
// requests become the same generate requests and whose connections share every limit.
#include <caf/actor_system.hpp>
#include <caf/io/middleman.hpp>
#include <caf/io/receive_policy.hpp>
#include <caf/io/system_messages.hpp>
#include <algorithm>
#include <cstdio>
#include <random>

#include "actors/gateway_state.hpp"
#include "actors/listen.hpp"
#include "runtime/wire/event_codec.hpp"
#include "runtime/wire/request_codec.hpp"

namespace troupe::actors {

namespace gateway_detail {

void write_bytes(self_ptr self, connection_handle hdl, const std::string& bytes) {
  auto& st = self->state;
  auto c = st.conns.find(hdl);
  if (c == st.conns.end() || bytes.empty()) return;
  self->write(hdl, bytes.size(), bytes.data());
  self->flush(hdl);
  c->second.unsent_bytes += bytes.size();
}

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
  forget_waiter(self, hdl);
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
    // Each completion (n > 1, or a batch's prompts) is a sequence of its own and counts against
    // the connection's limit.
    const int32_t seqs = g->sequences();
    if (cs.running_seqs + seqs > st.ctx->cfg.max_requests_per_connection)
      return write_error(self, hdl, wire::error_code::too_many_requests,
                         "this connection already has " + std::to_string(cs.running_seqs) +
                             " sequences running and this request asks for " + std::to_string(seqs) +
                             " (max_requests_per_connection is " +
                             std::to_string(st.ctx->cfg.max_requests_per_connection) + ")",
                         id);
    // One worker builds the request once and submits its completions as sequences rid .. rid + seqs - 1.
    int64_t rid = st.next_rid;
    st.next_rid += seqs;
    auto w = static_cast<int32_t>(rid % static_cast<int64_t>(st.workers.size()));
    cs.generates.emplace(id, running_generate{rid, seqs, seqs});
    cs.running_seqs += seqs;
    for (int32_t i = 0; i < seqs; ++i) st.routes.emplace(rid + i, route{hdl, id, w, true, seqs > 1 ? i : -1});
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
    for (const auto& a : f.adapters->names()) e.models.push_back({a, f.max_model_len, f.vocab_size, f.name});
    write_event(self, hdl, std::move(e));
  } else {
    write_error(self, hdl, wire::error_code::unsupported,
                "request type '" + std::string(wire::request_type(req)) + "' is not served by this server", id);
  }
}

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
    st.models = {ctx->facts.name, {}, ctx->facts.max_model_len, ctx->facts.aliases,
                 serve::parse_effort_budgets(ctx->cfg.reasoning_effort_budgets)};
    st.cors = serve::cors_policy_of(ctx->cfg);  // validate() has checked it
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
          if (rt.background) {
            background_deliver_frames(self, rt.client_id, item.bytes);
            continue;
          }
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
        st.background.clear();  // each has had its done (and is stored as it ended)
        if (st.drain_listener) self->send(st.drain_listener, drained_atom::value);
      },
      [=](lora_answer_msg& m) { on_lora_answer(self, m); },
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
            if (r.background) background_deliver(self, r.client_id, d);
            else write_event(self, r.hdl, d);
          } else {
            write_event(self, r.hdl, lost);
          }
        }
      },
  };
}

}  // namespace gateway_detail

caf::actor spawn_gateway(caf::actor_system& sys, context_ptr ctx, std::vector<caf::actor> workers,
                         std::promise<bind_result>* bound) {
  return sys.middleman().spawn_broker(gateway_detail::gateway, std::move(ctx), std::move(workers), bound);
}

}  // namespace troupe::actors
