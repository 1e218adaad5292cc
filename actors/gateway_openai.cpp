// The gateway's HTTP connections: the OpenAI-compatible API (docs/openai_api.md). Requests are
// cut by wire::http_request_parser and answered one at a time per connection, in order; a
// generate goes through the msgpack side's on_request (the same limits and routes) and its events
// come back through wire::openai::response_builder.
#include <caf/actor_system.hpp>
#include <caf/blocking_actor.hpp>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>
#include <random>

#include "actors/gateway_state.hpp"
#include "runtime/core/version.hpp"
#include "runtime/tokenizer/byte_level.hpp"
#include "runtime/wire/anthropic_messages.hpp"
#include "runtime/wire/event_codec.hpp"
#include "runtime/wire/openai_conversations.hpp"
#include "runtime/wire/openai_lora.hpp"
#include "runtime/wire/openai_tokenize.hpp"

namespace troupe::actors::gateway_detail {

// A whole response outside a generate (models, health, errors); closes when the client asked to.
void http_answer(self_ptr self, connection_handle hdl, int status, std::string_view type, const std::string& body,
                 bool keep_alive) {
  auto c = self->state.conns.find(hdl);
  const std::string headers = c != self->state.conns.end() && c->second.http ? c->second.http->headers : std::string();
  write_bytes(self, hdl, wire::http_response(status, type, body, keep_alive, headers));
  if (!keep_alive) drop_connection(self, hdl, true);
}

void http_answer_error(self_ptr self, connection_handle hdl, const wire::openai::api_error& e, bool keep_alive) {
  http_answer(self, hdl, e.status, "application/json", wire::openai::error_body(e), keep_alive);
}

void http_pump(self_ptr self, connection_handle hdl);

// A new request's id after its kind ("chatcmpl-", "cmpl-", "tokenize-"): the server's random
// prefix and a counter, so ids differ across replicas and never repeat within one.
static std::string next_http_base(gateway_state& st) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(++st.next_http_id));
  return st.http_id_prefix + hex;
}

// A stored response is read and deleted by its id alone, so the id is 128 random bits, not a
// counter another client could count on.
static std::string random_id(const char* prefix) {
  std::random_device rd;
  char hex[33];
  std::snprintf(hex, sizeof hex, "%08x%08x%08x%08x", static_cast<unsigned>(rd()), static_cast<unsigned>(rd()),
                static_cast<unsigned>(rd()), static_cast<unsigned>(rd()));
  return std::string(prefix) + hex;
}
static std::string random_response_id() { return random_id("resp_"); }

// OpenAI's Conversations API (/v1/conversations...): answered from the conversation store, whose
// ids are random too (conversations are read and changed by id alone).
static void on_conversations(self_ptr self, connection_handle hdl, const wire::http_request& req, std::string_view path) {
  auto& st = self->state;
  if (!st.ctx->conversations)
    return http_answer_error(self, hdl,
                             {404, "this server keeps no conversations (server.conversations_store_bytes = 0)",
                              "not_found", ""},
                             req.keep_alive);
  wire::openai::conversations_call call;
  call.method = req.method;
  call.rest = path.substr(std::string_view("/v1/conversations").size());
  call.body = req.body;
  call.order = req.query("order");
  call.limit = req.query("limit");
  call.after = req.query("after");
  call.now = static_cast<int64_t>(std::time(nullptr));
  call.new_id = random_id("conv_");
  const auto a = wire::openai::serve_conversations(*st.ctx->conversations, call);
  http_answer(self, hdl, a.status, "application/json", a.body, req.keep_alive);
}

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
  h.tokenize.reset();
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
  if (h.tokenize) {
    if (client_id != h.client_id) return;
    if (const auto* t = std::get_if<wire::tokenize_event>(&e)) {
      std::vector<std::string> strs;
      const tokenizer* tok = self->state.ctx->tok.get();
      // Each id's vocabulary string as tokenizer.json writes it (ByteLevel: "Ġ" for a space),
      // what Hugging Face's convert_ids_to_tokens and so vLLM return.
      if (h.tokenize->token_strs && tok)
        for (int32_t id : t->ids) strs.push_back(troupe::tok::byte_level::get().encode(tok->token_bytes(id)));
      write_bytes(self, hdl,
                  wire::http_response(200, "application/json",
                                      h.tokenize->anthropic_count
                                          ? wire::anthropic::count_body(t->ids.size())
                                          : wire::openai::tokenize_body(t->ids, self->state.ctx->facts.max_model_len,
                                                                        h.tokenize->token_strs ? &strs : nullptr),
                                      h.keep_alive, h.headers));
    } else if (const auto* err = std::get_if<wire::wire_error>(&e)) {
      const auto a = wire::openai::from_wire(*err);
      write_bytes(self, hdl,
                  wire::http_response(a.status, "application/json",
                                      h.tokenize->anthropic_count ? wire::anthropic::error_body(a) : wire::openai::error_body(a),
                                      h.keep_alive, h.headers));
    } else {
      return;
    }
    return http_finished(self, hdl);
  }
  if (!h.reply || client_id != h.client_id) return;  // a cancelled generate's last events
  std::string body, out;
  try {
    body = h.reply->feed(e);
  } catch (const std::exception& x) {  // never expected; one response fails, not the gateway
    std::fprintf(stderr, "troupe serve: cannot write an OpenAI response: %s; closing its connection\n", x.what());
    if (!h.head_sent)
      write_bytes(self, hdl,
                 wire::http_response(500, "application/json",
                                     wire::openai::error_body({500, x.what(), "internal", ""}), false, h.headers));
    return drop_connection(self, hdl, true);
  }
  if (!h.head_sent) {
    if (h.reply->streaming() && !body.empty()) {
      out = wire::http_stream_head(200, "text/event-stream", h.keep_alive, h.headers);
      h.head_sent = true;
    } else if (h.reply->complete()) {
      out = wire::http_response(h.reply->status(), "application/json", body, h.keep_alive, h.headers);
    }
  }
  if (h.head_sent) {
    wire::append_http_chunk(out, body);
    if (h.reply->complete()) wire::append_http_last_chunk(out);
  }
  write_bytes(self, hdl, out);
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

// POST /v1/load_lora_adapter and /v1/unload_lora_adapter (vLLM's, with
// [server] allow_runtime_lora_updating). Loading reads and checks the adapter's files on a
// thread of its own, has the executor take it between two steps (through a tokenizer worker and
// the scheduler, which orders it with the steps), then makes the name visible; the connection
// waits for that answer. Unloading hides the name at once; the scheduler empties the slot once
// its running requests have finished.
void on_lora_request(self_ptr self, connection_handle hdl, const wire::http_request& req, bool load) {
  auto& st = self->state;
  auto& h = *st.conns.at(hdl).http;
  if (req.method != "POST")
    return http_answer_error(self, hdl, {405, "use POST for " + std::string(req.path()), "method_not_allowed", ""},
                             req.keep_alive);
  if (!st.ctx->cfg.allow_runtime_lora_updating)
    return http_answer_error(self, hdl,
                             {404, "loading and unloading LoRA adapters while the server runs is off: start it with "
                                   "--allow-runtime-lora-updating ([server] allow_runtime_lora_updating)",
                              "not_found", ""},
                             req.keep_alive);
  auto r = wire::openai::parse_lora_request(req.body, load, st.models);
  if (!r.ok()) return http_answer_error(self, hdl, r.error, req.keep_alive);
  const auto& registry = st.ctx->facts.adapters;
  if (!load) {
    if (!registry->retire(r.name))
      return http_answer_error(self, hdl,
                               {404, "the LoRA adapter '" + r.name + "' cannot be found", "not_found", "lora_name"},
                               req.keep_alive);
    if (!st.workers.empty()) self->send(st.workers.front(), lora_retired_msg{});
    return http_answer(self, hdl, 200, "text/plain; charset=utf-8", wire::openai::lora_unloaded_text(r.name),
                       req.keep_alive);
  }
  if (registry->find(r.name))
    return http_answer_error(self, hdl,
                             {400, "the LoRA adapter '" + r.name + "' has already been loaded", "invalid_value", "lora_name"},
                             req.keep_alive);
  h.awaiting_reply = true;
  auto gateway = caf::actor_cast<caf::actor>(self);
  caf::actor worker = st.workers.empty() ? caf::actor() : st.workers.front();
  self->spawn([ctx = st.ctx, gateway, worker, hdl, name = r.name, dir = r.path](caf::blocking_actor* a) {
    auto error = [&](int status, const std::string& code, const std::string& msg) {
      a->send(gateway, lora_answer_msg{hdl, status, wire::openai::error_body({status, msg, code, "lora_path"})});
    };
    std::shared_ptr<const lora_adapter> adapter;
    try {
      adapter = std::make_shared<const lora_adapter>(load_lora_adapter(dir, ctx->ckpt->config, name));
      check_lora_rank(*adapter, ctx->cfg.max_lora_rank, serve::kMaxLoraRank);
    } catch (const troupe::error& e) {
      return error(e.code() == errc::io_error ? 404 : 400, e.code() == errc::unsupported ? "unsupported" : "invalid_value",
                   e.what());
    }
    int32_t slot = -1;
    try {
      slot = ctx->facts.adapters->reserve(adapter);
    } catch (const troupe::error& e) {
      return error(400, "invalid_value", e.what());
    }
    std::string failure;
    a->request(worker, std::chrono::seconds(60), lora_install_msg{slot, adapter})
        .receive([&](lora_install_reply& rep) { failure = rep.ok ? std::string() : rep.error; },
                 [&](caf::error& e) { failure = "the executor did not take the adapter: " + caf::to_string(e); });
    if (!failure.empty()) {
      ctx->facts.adapters->release(slot);
      return error(400, "unsupported", failure);
    }
    ctx->facts.adapters->publish(slot);
    a->send(gateway, lora_answer_msg{hdl, 200, wire::openai::lora_loaded_text(name)});
  });
}

void answer_awaited(self_ptr self, connection_handle hdl, int status, std::string_view type, const std::string& body) {
  auto c = self->state.conns.find(hdl);
  // The client left (its handle may be a newer connection's now, not waiting: nothing to answer).
  if (c == self->state.conns.end() || !c->second.http || !c->second.http->awaiting_reply) return;
  auto& h = *c->second.http;
  h.awaiting_reply = false;
  write_bytes(self, hdl, wire::http_response(status, type, body, h.keep_alive, h.headers));
  if (!h.keep_alive) return drop_connection(self, hdl, true);
  http_pump(self, hdl);
}

void on_lora_answer(self_ptr self, lora_answer_msg& m) {  // the adapter stays loaded if the client left
  answer_awaited(self, m.hdl, m.status, m.status == 200 ? "text/plain; charset=utf-8" : "application/json", m.body);
}

// POST /reset_prefix_cache (vLLM's, in its dev mode): the scheduler forgets the cached prefix
// blocks between two steps, only while nothing runs.
static void on_reset_prefix_cache(self_ptr self, connection_handle hdl, const wire::http_request& req) {
  auto& st = self->state;
  if (!st.ctx->cfg.dev_endpoints)
    return http_answer_error(self, hdl,
                             {404, "/reset_prefix_cache is a development endpoint: start the server with "
                                   "--set server.dev_endpoints=true (vLLM's VLLM_SERVER_DEV_MODE)",
                              "not_found", ""},
                             req.keep_alive);
  if (req.method != "POST")
    return http_answer_error(self, hdl, {405, "use POST for /reset_prefix_cache", "method_not_allowed", ""}, req.keep_alive);
  st.conns.at(hdl).http->awaiting_reply = true;
  self->request(st.workers.front(), std::chrono::seconds(60), reset_prefix_cache_msg{})
      .then(
          [=](reset_prefix_cache_reply& r) {
            if (r.ok) return answer_awaited(self, hdl, 200, "application/json", "{}");
            answer_awaited(self, hdl, 409, "application/json",
                           wire::openai::error_body({409,
                                                     std::to_string(r.running) +
                                                         " requests are running: the prefix cache can be reset only "
                                                         "while none runs (their blocks are in it)",
                                                     "requests_running", ""}));
          },
          [=](caf::error& e) {
            answer_awaited(self, hdl, 500, "application/json",
                           wire::openai::error_body({500, "the scheduler did not answer: " + self->system().render(e),
                                                     "internal", ""}));
          });
}

// GET /v1/responses/{id}: a stored response as it was sent (a running background one as it is
// now; with ?stream=true, a background one's events); DELETE: it is forgotten; GET
// /v1/responses/{id}/input_items: the input it answered; POST /v1/responses/{id}/cancel: a
// background response is cancelled (OpenAI's).
static void on_stored_response(self_ptr self, connection_handle hdl, const wire::http_request& req, std::string_view id) {
  auto& st = self->state;
  auto suffix = [&](std::string_view s) {
    const bool has = id.size() > s.size() && id.substr(id.size() - s.size()) == s;
    if (has) id.remove_suffix(s.size());
    return has;
  };
  const bool items = suffix("/input_items");
  const bool cancel = !items && suffix("/cancel");
  if (id.empty() || id.find('/') != std::string_view::npos)
    return http_answer_error(self, hdl,
                             {404, "no endpoint " + std::string(req.path()) +
                                       " (served: GET and DELETE /v1/responses/{id}, GET /v1/responses/{id}/input_items, "
                                       "POST /v1/responses/{id}/cancel)",
                              "not_found", ""},
                             req.keep_alive);
  const char* method = items ? "GET" : cancel ? "POST" : nullptr;
  if (method && req.method != method)
    return http_answer_error(self, hdl, {405, "use " + std::string(method) + " for " + std::string(req.path()), "method_not_allowed", ""},
                             req.keep_alive);
  if (!method && req.method != "GET" && req.method != "DELETE")
    return http_answer_error(self, hdl, {405, "use GET or DELETE for " + std::string(req.path()), "method_not_allowed", ""},
                             req.keep_alive);
  const auto& store = st.ctx->responses;
  const std::string key(id);
  if (cancel) return cancel_response(self, hdl, key);
  const auto running = st.background.find(key);
  if (req.method == "DELETE") {
    if (running != st.background.end())
      return http_answer_error(self, hdl,
                               {400, "response '" + key + "' is a background response still running: cancel it first "
                                                          "(POST /v1/responses/" + key + "/cancel)",
                                "invalid_value", "response_id"},
                               req.keep_alive);
    if (!store || !store->erase(key)) return http_answer_error(self, hdl, no_stored_response(self, key), req.keep_alive);
    return http_answer(self, hdl, 200, "application/json",
                       nlohmann::ordered_json{{"id", key}, {"object", "response.deleted"}, {"deleted", true}}.dump(),
                       req.keep_alive);
  }
  if (!items) {
    const auto q = wire::openai::parse_stream_query(req.query("stream"), req.query("starting_after"));
    if (q.error) return http_answer_error(self, hdl, *q.error, req.keep_alive);
    if (q.stream) return follow_response(self, hdl, key, q.starting_after);
    if (running != st.background.end())
      return http_answer(self, hdl, 200, "application/json", running->second.resp->current_json(), req.keep_alive);
  }
  auto found = store ? store->get(key) : std::nullopt;
  if (!found) return http_answer_error(self, hdl, no_stored_response(self, key), req.keep_alive);
  if (items) {
    const auto page = wire::openai::input_items(*found, key, req.query("order"), req.query("limit"), req.query("after"));
    return http_answer(self, hdl, page.status, "application/json", page.body, req.keep_alive);
  }
  http_answer(self, hdl, 200, "application/json", *found->response, req.keep_alive);
}

void on_http_request(self_ptr self, connection_handle hdl, wire::http_request&& req) {
  auto& st = self->state;
  auto& h = *st.conns.at(hdl).http;
  h.keep_alive = req.keep_alive;
  // CORS (vLLM's middleware wraps every route): the answer carries the allowed origin's lines, and
  // a preflight is answered here, before any route or API key.
  h.headers = st.cors.enabled() ? wire::cors_headers(st.cors, req) : std::string();
  if (st.cors.enabled() && wire::is_cors_preflight(req)) {
    auto a = wire::answer_cors_preflight(st.cors, req);
    h.headers = std::move(a.headers);
    return http_answer(self, hdl, a.status, "text/plain; charset=utf-8", a.body, req.keep_alive);
  }
  // The client's id for the request (vLLM's X-Request-Id, else the body's request_id): the
  // response's id is made of it, so one request can be followed through a proxy's and the
  // server's logs; with server.request_id_headers every answer carries it back (one made here when
  // none came).
  const std::string* given = req.header("x-request-id");
  if (given && !wire::openai::valid_request_id(*given))
    return http_answer_error(self, hdl,
                             {400, "header X-Request-Id must be 1..256 visible ASCII characters (no spaces)",
                              "invalid_value", "X-Request-Id"},
                             req.keep_alive);
  const std::string base = given ? *given : next_http_base(st);
  if (st.ctx->cfg.request_id_headers) h.headers += "X-Request-Id: " + base + "\r\n";
  std::string_view path = req.path();
  if (path == "/invocations") {  // SageMaker's: one path for every endpoint, told apart by the body
    if (req.method != "POST")
      return http_answer_error(self, hdl, {405, "use POST for /invocations", "method_not_allowed", ""}, req.keep_alive);
    const auto routed = wire::openai::invocation_path(req.body);
    if (!routed)
      return http_answer_error(self, hdl,
                               {400,
                                "a body for /invocations needs 'messages' (chat), 'prompt' (completions), 'input' "
                                "(embeddings), 'query' (rerank), or 'text_1' / 'queries' (score)",
                                "missing_field", ""},
                               req.keep_alive);
    path = *routed;  // then guarded and answered as that endpoint
  }
  const bool chat = path == "/v1/chat/completions", completion = path == "/v1/completions",
             embeddings = path == "/v1/embeddings",
             rerank = path == "/v1/rerank" || path == "/rerank" || path == "/v2/rerank",  // vLLM's three
             score = path == "/v1/score" || path == "/score", responses = path == "/v1/responses",
             classify = path == "/classify" || path == "/v1/classify",  // vLLM's, and SGLang's /v1 form
             messages = path == "/v1/messages";  // Anthropic's
  auto not_allowed = [&](const char* method) {
    http_answer_error(self, hdl,
                      {405, "use " + std::string(method) + " for " + std::string(path), "method_not_allowed", ""},
                      req.keep_alive);
  };
  // The key guards /v1, the aliases outside it that run the model and the dev endpoint (vLLM's guard /v1 only).
  if (const auto& key = st.ctx->cfg.api_key; !key.empty() && (path.rfind("/v1/", 0) == 0 || rerank || score || classify || path == "/reset_prefix_cache")) {
    const std::string* auth = req.header("authorization");
    const std::string* x_api_key = req.header("x-api-key");  // Anthropic's clients send the key so
    constexpr std::string_view bearer = "Bearer ";
    const bool bearer_ok = auth && auth->compare(0, bearer.size(), bearer) == 0 &&
                           same_secret(std::string_view(*auth).substr(bearer.size()), key);
    if (!bearer_ok && !(x_api_key && same_secret(*x_api_key, key)))
      return http_answer_error(self, hdl,
                               {401, auth || x_api_key ? "wrong API key"
                                                       : "this server needs an API key: 'Authorization: Bearer KEY' "
                                                         "(or Anthropic's 'x-api-key: KEY')",
                                "invalid_api_key", ""},
                               req.keep_alive);
  }
  st.models.adapters = st.ctx->facts.adapters->names();  // adapters come and go at run time
  if (path == "/v1/load_lora_adapter" || path == "/v1/unload_lora_adapter")
    return on_lora_request(self, hdl, req, path == "/v1/load_lora_adapter");
  if (path == "/reset_prefix_cache") return on_reset_prefix_cache(self, hdl, req);
  if (path.rfind("/v1/responses/", 0) == 0) return on_stored_response(self, hdl, req, path.substr(14));
  if (path == "/v1/conversations" || path.rfind("/v1/conversations/", 0) == 0) return on_conversations(self, hdl, req, path);
  if (path == "/v1/messages/count_tokens") {  // Anthropic's
    if (req.method != "POST") return not_allowed("POST");
    const std::string id = "count-" + base;
    auto parsed = wire::anthropic::parse_messages(req.body, st.models, id, true);
    if (!parsed.ok())
      return http_answer(self, hdl, parsed.error.status, "application/json", wire::anthropic::error_body(parsed.error),
                         req.keep_alive);
    http_conn::tokenize_answer answer;
    answer.anthropic_count = true;
    h.tokenize.emplace(answer);
    h.client_id = id;
    return on_request(self, hdl, wire::request{std::move(*parsed.count)});
  }
  if (path == "/v1/models") {
    if (req.method != "GET") return not_allowed("GET");
    return http_answer(self, hdl, 200, "application/json",
                       wire::openai::models_body(st.models, static_cast<int64_t>(std::time(nullptr))),
                       req.keep_alive);
  }
  if (path.rfind("/v1/models/", 0) == 0) {  // OpenAI's models.retrieve; a name may hold '/'
    if (req.method != "GET") return not_allowed("GET");
    const std::string name = wire::percent_decode(path.substr(11), false);
    auto body = wire::openai::model_body(st.models, name, static_cast<int64_t>(std::time(nullptr)));
    if (!body)
      return http_answer_error(self, hdl,
                               {404, "the model '" + name + "' does not exist (GET /v1/models lists those served)",
                                "model_not_found", "model"},
                               req.keep_alive);
    return http_answer(self, hdl, 200, "application/json", *body, req.keep_alive);
  }
  if (path == "/metrics") {  // where vLLM serves it, so its scrape configs work unchanged
    if (req.method != "GET") return not_allowed("GET");
    return http_answer(self, hdl, 200, "text/plain; version=0.0.4; charset=utf-8", st.ctx->metrics->render(),
                       req.keep_alive);
  }
  // /ping is SageMaker's health check, which vLLM serves beside /health (GET and POST).
  if (path == "/health" || path == "/ping") {
    const bool ping = path == "/ping";
    if (req.method != "GET" && !(ping && req.method == "POST")) return not_allowed(ping ? "GET or POST" : "GET");
    return http_answer(self, hdl, st.draining ? 503 : 200, "application/json",
                       st.draining ? R"({"status": "draining"})" : R"({"status": "ok"})", req.keep_alive);
  }
  if (path == "/version") {  // vLLM's
    if (req.method != "GET") return not_allowed("GET");
    return http_answer(self, hdl, 200, "application/json",
                       "{\"version\": \"" + std::string(troupe::version()) + "\"}", req.keep_alive);
  }
  if (path == "/tokenize") {  // vLLM's, beside /v1 (and, as there, outside the API key's reach)
    if (req.method != "POST") return not_allowed("POST");
    const std::string id = "tokenize-" + base;
    auto parsed = wire::openai::parse_tokenize(req.body, st.models, id);
    if (!parsed.ok()) return http_answer_error(self, hdl, parsed.error, req.keep_alive);
    h.tokenize.emplace(http_conn::tokenize_answer{parsed.token_strs});
    h.client_id = id;
    return on_request(self, hdl, wire::request{std::move(*parsed.req)});
  }
  if (path == "/detokenize") {
    if (req.method != "POST") return not_allowed("POST");
    auto parsed = wire::openai::parse_detokenize(req.body, st.models);
    if (!parsed.ok()) return http_answer_error(self, hdl, parsed.error, req.keep_alive);
    const tokenizer* tok = st.ctx->tok.get();
    if (!tok)
      return http_answer_error(self, hdl, {400, "this model has no tokenizer: /detokenize cannot turn ids into text", "unsupported", "tokens"},
                               req.keep_alive);
    std::string text;
    try {  // microseconds a token: the body's size bounds it, like parsing the body itself
      text = tok->decode(*parsed.ids);
    } catch (const std::exception& e) {
      return http_answer_error(self, hdl, {400, e.what(), "invalid_value", "tokens"}, req.keep_alive);
    }
    return http_answer(self, hdl, 200, "application/json", wire::openai::detokenize_body(text), req.keep_alive);
  }
  if (!chat && !completion && !embeddings && !rerank && !score && !classify && !responses && !messages)
    return http_answer_error(self, hdl,
                             {404, "no endpoint " + std::string(path) +
                                       " (served: POST /v1/chat/completions, POST /v1/completions, POST /v1/responses, "
                                       "GET and DELETE /v1/responses/{id}, GET /v1/responses/{id}/input_items, POST /v1/responses/{id}/cancel, "
                                       "POST /v1/conversations (and its items), POST /v1/messages, POST /v1/messages/count_tokens, "
                                       "POST /v1/embeddings, POST /v1/rerank, POST /v1/score, POST /classify, GET /v1/models, "
                                       "POST /tokenize, POST /detokenize, POST /invocations, GET /health, GET /ping, GET /version, GET /metrics)",
                              "not_found", ""},
                             req.keep_alive);
  if (req.method != "POST") return not_allowed("POST");
  const tokenizer* tok = st.ctx->tok.get();
  auto token_bytes = [tok](int32_t t) {
    if (!tok) return "token_id:" + std::to_string(t);
    try {
      return std::string(tok->token_bytes(t));
    } catch (const std::exception&) {
      return std::string();
    }
  };
  const auto now = static_cast<int64_t>(std::time(nullptr));
  // Qwen3's JSON calls stream their arguments as they are written; Qwen3-Coder's typed values
  // need the whole call first.
  const bool stream_arguments = st.ctx->facts.tool_format == serve::tool_call_format::hermes;
  std::string id;
  wire::generate_request g;
  if (messages) {
    id = "msg_" + base;
    auto parsed = wire::anthropic::parse_messages(req.body, st.models, id);
    if (!parsed.ok())
      return http_answer(self, hdl, parsed.error.status, "application/json", wire::anthropic::error_body(parsed.error),
                         req.keep_alive);
    parsed.chat.stream_tool_arguments = stream_arguments;
    h.reply = std::make_unique<wire::anthropic::messages_builder>(parsed);
    g = std::move(*parsed.chat.req);
  } else if (responses) {
    id = random_response_id();
    auto parsed = wire::openai::parse_responses(req.body, st.models, id, st.ctx->responses.get(),
                                                st.ctx->conversations.get());
    if (!parsed.ok()) return http_answer_error(self, hdl, parsed.chat.error, req.keep_alive);
    parsed.chat.stream_tool_arguments = stream_arguments;
    // </think> closes Qwen3's thinking: the tokens up to it are the usage's reasoning_tokens.
    const int32_t think_end = tok ? tok->token_to_id("</think>").value_or(-1) : -1;
    if (parsed.background) return start_background(self, hdl, parsed, now, token_bytes, think_end);
    auto reply = std::make_unique<wire::openai::responses_builder>(parsed, now, token_bytes, think_end);
    // Kept with its conversation and output, for previous_response_id and GET; with
    // `conversation`, its input and output join that conversation.
    std::shared_ptr<wire::openai::response_store> store = parsed.store ? st.ctx->responses : nullptr;
    std::shared_ptr<wire::openai::conversation_store> conversations =
        parsed.conversation_id ? st.ctx->conversations : nullptr;
    if (store || conversations)
      reply->set_on_final([store, conversations, items = parsed.conversation, conv = parsed.conversation_id.value_or(""),
                           added = parsed.new_items, id](const nlohmann::ordered_json& r) {
        const std::string text = wire::openai::response_text(r);  // one dump for both
        if (store) wire::openai::keep_response(*store, id, *items, r, nullptr, true, &text);
        if (conversations) wire::openai::add_to_conversation(*conversations, conv, *added, r, &text);
      });
    h.reply = std::move(reply);
    g = std::move(*parsed.chat.req);
  } else {
    const auto ep = chat         ? wire::openai::endpoint::chat
                    : embeddings ? wire::openai::endpoint::embeddings
                    : rerank     ? wire::openai::endpoint::rerank
                    : score      ? wire::openai::endpoint::score
                    : classify   ? wire::openai::endpoint::classify
                                 : wire::openai::endpoint::completion;
    const char* kind = chat         ? "chatcmpl-"
                       : embeddings ? "embd-"
                       : rerank     ? "rerank-"
                       : score      ? "score-"
                       : classify   ? "classify-"
                                    : "cmpl-";
    id = kind + base;
    auto parsed = wire::openai::parse_request(ep, req.body, st.models, id);
    if (!parsed.ok()) return http_answer_error(self, hdl, parsed.error, req.keep_alive);
    if (parsed.request_id && !given) parsed.req->id = id = kind + *parsed.request_id;  // the header wins, as vLLM's
    parsed.stream_tool_arguments = stream_arguments;
    if (st.ctx->cfg.return_tokens_as_token_ids) parsed.tokens_as_ids = true;
    auto reply = std::make_unique<wire::openai::response_builder>(ep, parsed, now, token_bytes);
    if (parsed.echo) {  // each prompt as text and as ids, whichever form it came in
      const auto& pg = *parsed.req;
      const auto echo = [&](size_t p, wire::prompt_kind kind, std::string text, std::vector<int32_t> ids) {
        try {
          if (tok && kind == wire::prompt_kind::ids) text = tok->decode(ids);
          if (tok && kind == wire::prompt_kind::text) ids = tok->encode(text);
        } catch (const std::exception&) {  // ids past the vocabulary: the request fails with its own error
        }
        reply->set_echo_prompt(p, std::move(text), std::move(ids));
      };
      if (pg.prompts.empty()) echo(0, pg.kind, pg.prompt, pg.prompt_ids);
      for (size_t p = 0; p < pg.prompts.size(); ++p) echo(p, pg.prompts[p].kind, pg.prompts[p].text, pg.prompts[p].ids);
    }
    h.reply = std::move(reply);
    g = std::move(*parsed.req);
  }
  h.client_id = id;
  h.head_sent = false;
  on_request(self, hdl, wire::request{std::move(g)});
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
    if (c == self->state.conns.end() || c->second.http->busy()) return;
    auto& h = *c->second.http;
    wire::http_request req;
    switch (h.parser.next(req)) {
      case wire::http_request_parser::status::need_more: return;
      case wire::http_request_parser::status::send_continue:
        write_bytes(self, hdl, "HTTP/1.1 100 Continue\r\n\r\n");
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
  if (h.busy() && h.parser.buffered_bytes() > static_cast<size_t>(self->state.ctx->cfg.max_frame_bytes) + 16384) {
    std::fprintf(stderr, "troupe serve: an HTTP client pipelined more than max_frame_bytes behind a running request: closing it\n");
    return drop_connection(self, hdl, true);
  }
  http_pump(self, hdl);
  apply_backpressure(self, hdl);
}

}  // namespace troupe::actors::gateway_detail
