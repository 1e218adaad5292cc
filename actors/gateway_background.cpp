// The Responses API's background responses (docs/openai_api.md, "Background responses"): each runs
// as a generate routed to no connection. wire::openai::background_response builds it and keeps it
// in the store; here are the connections following its events or waiting for its cancel's answer.
#include <caf/actor_system.hpp>
#include <nlohmann/json.hpp>

#include "actors/gateway_state.hpp"
#include "runtime/wire/event_codec.hpp"

namespace troupe::actors::gateway_detail {

namespace {

// The connection waits on background response `id` (busy, and not idle for the idle sweep).
void begin_wait(self_ptr self, connection_handle hdl, const std::string& id) {
  auto& cs = self->state.conns.at(hdl);
  cs.http->awaiting = id;
  ++cs.other_requests;
}

// Its wait is over: the next pipelined request may start.
void end_wait(self_ptr self, connection_handle hdl) {
  auto c = self->state.conns.find(hdl);
  if (c == self->state.conns.end() || c->second.http->awaiting.empty()) return;
  auto& cs = c->second;
  cs.http->awaiting.clear();
  --cs.other_requests;
  cs.quiet_since = clock::now();
  if (!cs.http->keep_alive) return drop_connection(self, hdl, true);
  http_pump(self, hdl);
}

}  // namespace

wire::openai::api_error no_stored_response(self_ptr self, const std::string& id) {
  return {404,
          self->state.ctx->responses
              ? "no response '" + id + "' is stored here (never stored, deleted, or dropped to keep the store within "
                                       "server.responses_store_bytes)"
              : "no response '" + id + "' is stored here: this server stores none (server.responses_store_bytes = 0)",
          "not_found", "response_id"};
}

void start_background(self_ptr self, connection_handle hdl, wire::openai::parsed_responses& p, int64_t created,
                      wire::openai::token_bytes_fn token_bytes, int32_t think_end) {
  auto& st = self->state;
  const bool keep_alive = st.conns.at(hdl).http->keep_alive;
  if (st.draining)
    return http_answer_error(self, hdl, {503, "the server is shutting down", "shutting_down", ""}, keep_alive);
  const auto cap = static_cast<size_t>(st.ctx->cfg.max_background_responses);
  if (st.background.size() >= cap)
    return http_answer_error(self, hdl,
                             {429,
                              "this server already runs " + std::to_string(st.background.size()) +
                                  " background responses (server.max_background_responses is " + std::to_string(cap) +
                                  "): wait for one to finish, or ask without background",
                              "too_many_requests", "background"},
                             keep_alive);
  auto resp = std::make_unique<wire::openai::background_response>(p, created, std::move(token_bytes), think_end,
                                                                   st.ctx->responses, st.ctx->conversations);
  const std::string id = resp->id();
  const bool stream = resp->streamed();
  const std::string queued = resp->created_json();
  p.chat.req->stream = true;  // its output grows token by token, streamed or not (background_response)
  const int64_t rid = st.next_rid++;
  const auto w = static_cast<int32_t>(rid % static_cast<int64_t>(st.workers.size()));
  route r;
  r.client_id = id;
  r.worker = w;
  r.generate = true;
  r.background = true;
  st.routes.emplace(rid, std::move(r));
  st.background.emplace(id, background_job{std::move(resp), rid, false, {}, {}});
  self->send(st.workers[static_cast<size_t>(w)],
             generate_msg{rid, std::make_shared<const wire::generate_request>(std::move(*p.chat.req)), clock::now()});
  if (stream) return follow_response(self, hdl, id, -1);
  http_answer(self, hdl, 200, "application/json", queued, keep_alive);
}

void background_deliver(self_ptr self, const std::string& id, const wire::event& e) {
  auto& st = self->state;
  auto j = st.background.find(id);
  if (j == st.background.end()) return;
  auto& job = j->second;
  const size_t before = job.resp->events().size();
  job.resp->feed(e);
  const bool done = job.resp->complete();
  std::string text;
  for (size_t i = before; i < job.resp->events().size(); ++i) text += job.resp->events()[i];
  if (!done) {
    if (text.empty()) return;
    const auto followers = job.followers;  // back-pressure may drop one
    for (auto hdl : followers) {
      std::string out;
      wire::append_http_chunk(out, text);
      write_bytes(self, hdl, out);
    }
    for (auto hdl : followers) apply_backpressure(self, hdl);
    return;
  }
  // Out of the map first: a waiting connection's next request may start or follow another one.
  const auto followers = std::move(job.followers);
  const auto cancellers = std::move(job.cancellers);
  const std::string final = job.resp->current_json();
  st.background.erase(j);
  for (auto hdl : followers) {
    if (!st.conns.count(hdl)) continue;
    std::string out;
    wire::append_http_chunk(out, text);
    wire::append_http_last_chunk(out);
    write_bytes(self, hdl, out);
  }
  for (auto hdl : cancellers) {
    auto c = st.conns.find(hdl);
    if (c == st.conns.end()) continue;
    write_bytes(self, hdl, wire::http_response(200, "application/json", final, c->second.http->keep_alive, c->second.http->headers));
  }
  for (const auto* hdls : {&followers, &cancellers})
    for (auto hdl : *hdls) {
      end_wait(self, hdl);
      apply_backpressure(self, hdl);
    }
}

void forget_waiter(self_ptr self, connection_handle hdl) {
  auto& st = self->state;
  auto c = st.conns.find(hdl);
  if (c == st.conns.end() || !c->second.http || c->second.http->awaiting.empty()) return;
  auto j = st.background.find(c->second.http->awaiting);
  if (j == st.background.end()) return;
  std::erase(j->second.followers, hdl);
  std::erase(j->second.cancellers, hdl);
}

void background_deliver_frames(self_ptr self, const std::string& id, const std::string& bytes) {
  wire::frame_decoder frames(UINT32_MAX);
  frames.feed(bytes);
  std::string payload;
  while (frames.next(payload) == wire::frame_decoder::status::frame) {
    auto d = wire::decode_event(payload);
    if (d.ok()) background_deliver(self, id, *d.ev);
  }
}

void follow_response(self_ptr self, connection_handle hdl, const std::string& id, int64_t starting_after) {
  auto& st = self->state;
  auto& h = *st.conns.at(hdl).http;
  const wire::openai::api_error not_streamed{
      400, "response '" + id + "' has no events to stream (it was not created with background: true and stream: true, or its "
                               "events did not fit server.responses_store_bytes): GET it without stream",
      "invalid_value", "stream"};
  // The stream's head and the events after starting_after.
  auto replay = [&](const std::vector<std::string>& events) {
    std::string out = wire::http_stream_head(200, "text/event-stream", h.keep_alive, h.headers);
    wire::append_http_chunk(out, wire::openai::events_after(events, starting_after));
    return out;
  };
  auto j = st.background.find(id);
  if (j != st.background.end()) {  // running: what it has streamed so far, then each event as it comes
    if (!j->second.resp->streamed()) return http_answer_error(self, hdl, not_streamed, h.keep_alive);
    write_bytes(self, hdl, replay(j->second.resp->events()));
    j->second.followers.push_back(hdl);
    return begin_wait(self, hdl, id);
  }
  auto found = st.ctx->responses ? st.ctx->responses->get(id) : std::nullopt;
  if (!found) return http_answer_error(self, hdl, no_stored_response(self, id), h.keep_alive);
  if (!found->events) return http_answer_error(self, hdl, not_streamed, h.keep_alive);
  std::string out = replay(*found->events);
  wire::append_http_last_chunk(out);
  const bool keep_alive = h.keep_alive;
  write_bytes(self, hdl, out);
  if (!keep_alive) drop_connection(self, hdl, true);
}

void cancel_response(self_ptr self, connection_handle hdl, const std::string& id) {
  auto& st = self->state;
  const bool keep_alive = st.conns.at(hdl).http->keep_alive;
  auto j = st.background.find(id);
  if (j != st.background.end()) {  // answered with the cancelled response once its generate ends
    auto& job = j->second;
    if (!job.cancel_sent) {
      job.cancel_sent = true;
      if (auto r = st.routes.find(job.rid); r != st.routes.end())
        self->send(st.workers[static_cast<size_t>(r->second.worker)], cancel_msg{job.rid});
    }
    job.cancellers.push_back(hdl);
    return begin_wait(self, hdl, id);
  }
  auto found = st.ctx->responses ? st.ctx->responses->get(id) : std::nullopt;
  if (!found) return http_answer_error(self, hdl, no_stored_response(self, id), keep_alive);
  // A finished background response is answered as it is (OpenAI's: cancelling twice is harmless).
  const auto r = nlohmann::ordered_json::parse(*found->response, nullptr, false);
  if (!r.is_object() || r.value("background", false) != true)
    return http_answer_error(self, hdl,
                             {400, "response '" + id + "' was not created with background: true: only background responses can be cancelled",
                              "invalid_value", "response_id"},
                             keep_alive);
  http_answer(self, hdl, 200, "application/json", *found->response, keep_alive);
}

}  // namespace troupe::actors::gateway_detail
