// Internal to the gateway broker (gateway.cpp: the msgpack protocol and the broker itself;
// gateway_openai.cpp: the OpenAI-compatible HTTP API): its state, and the functions each half
// calls in the other.
#pragma once

#include <caf/io/broker.hpp>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "actors/gateway.hpp"
#include "actors/messages.hpp"
#include "runtime/wire/background_response.hpp"
#include "runtime/wire/cors.hpp"
#include "runtime/wire/frame.hpp"
#include "runtime/wire/http.hpp"
#include "runtime/wire/openai.hpp"
#include "runtime/wire/openai_responses.hpp"

namespace troupe::actors::gateway_detail {

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
  std::unique_ptr<wire::openai::reply_builder> reply;  // the generate being answered
  struct tokenize_answer {
    bool token_strs = false;  // return_token_strs
    bool anthropic_count = false;  // /v1/messages/count_tokens: {"input_tokens"}, Anthropic's errors
  };
  std::optional<tokenize_answer> tokenize;  // or the /tokenize (its worker's reply ends it)
  // Or a /v1/load_lora_adapter or /reset_prefix_cache: the answer of the actor doing it ends it.
  bool awaiting_reply = false;
  std::string client_id;                    // its id
  // Or a background response (gateway_background.cpp) being followed or cancelled: its id.
  std::string awaiting;
  bool busy() const noexcept { return reply != nullptr || tokenize.has_value() || awaiting_reply || !awaiting.empty(); }
  // Header lines every answer to the request being answered carries: CORS's (cors.hpp) and, with
  // server.request_id_headers, X-Request-Id; or "".
  std::string headers;
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
  bool background = false;  // a background response's (client_id is its id; hdl is none)
};

// A background response running (gateway_background.cpp): the connections following its events
// (caught up to the last one) and those waiting for its cancel's answer.
struct background_job {
  std::unique_ptr<wire::openai::background_response> resp;
  int64_t rid = 0;
  bool cancel_sent = false;
  std::vector<connection_handle> followers, cancellers;
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
  wire::openai::served_models models;   // the names the API answers to (fixed once the server runs)
  wire::cors_policy cors;               // server.allowed_origins ... (fixed once the server runs)
  uint64_t next_http_id = 0;
  std::unordered_map<std::string, background_job> background;  // by response id
};

using self_ptr = caf::io::stateful_broker<gateway_state>*;

// gateway.cpp
void write_bytes(self_ptr self, connection_handle hdl, const std::string& bytes);
// An event to a connection: a frame on a msgpack one, its part of the response on an HTTP one.
void write_event(self_ptr self, connection_handle hdl, const wire::event& e);
void write_error(self_ptr self, connection_handle hdl, wire::error_code code, std::string msg, std::string id);
void drop_connection(self_ptr self, connection_handle hdl, bool close_socket);
void apply_backpressure(self_ptr self, connection_handle hdl);
void on_request(self_ptr self, connection_handle hdl, wire::request&& req);
bool same_secret(std::string_view given, const std::string& want);

// A /v1/load_lora_adapter's answer, from the loader that read the adapter off the gateway's thread.
struct lora_answer_msg {
  connection_handle hdl;
  int status = 200;
  std::string body;  // vLLM's success text, or an OpenAI error body
};

// gateway_openai.cpp
void on_lora_answer(self_ptr self, lora_answer_msg& m);
// The answer a connection waited for (awaiting_reply), then its next request.
void answer_awaited(self_ptr self, connection_handle hdl, int status, std::string_view type, const std::string& body);
void http_deliver(self_ptr self, connection_handle hdl, const std::string& client_id, const wire::event& e);
void http_deliver_frames(self_ptr self, connection_handle hdl, const std::string& client_id, const std::string& bytes);
void on_http_data(self_ptr self, connection_handle hdl, const std::vector<char>& buf);
void http_answer(self_ptr self, connection_handle hdl, int status, std::string_view type, const std::string& body,
                 bool keep_alive);
void http_answer_error(self_ptr self, connection_handle hdl, const wire::openai::api_error& e, bool keep_alive);
void http_pump(self_ptr self, connection_handle hdl);

// gateway_background.cpp: the Responses API's background responses.
// Starts parsed request `p` (p.background) unless the server drains or runs its cap of them, and
// answers its creator: at once with it queued, or, streamed, by following its events.
void start_background(self_ptr self, connection_handle hdl, wire::openai::parsed_responses& p, int64_t created,
                      wire::openai::token_bytes_fn token_bytes, int32_t think_end);
wire::openai::api_error no_stored_response(self_ptr self, const std::string& id);  // 404 naming why
void background_deliver(self_ptr self, const std::string& id, const wire::event& e);
void background_deliver_frames(self_ptr self, const std::string& id, const std::string& bytes);
// GET /v1/responses/{id}?stream=true: the events after `starting_after`, then (still running)
// each as it comes. POST /v1/responses/{id}/cancel. Both answer a stored response too.
void follow_response(self_ptr self, connection_handle hdl, const std::string& id, int64_t starting_after);
void cancel_response(self_ptr self, connection_handle hdl, const std::string& id);
// A connection that goes away leaves the background response it waits on (its handle, a socket's
// number, may come back as another connection's).
void forget_waiter(self_ptr self, connection_handle hdl);

}  // namespace troupe::actors::gateway_detail

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::gateway_detail::lora_answer_msg)
