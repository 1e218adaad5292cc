// Troupe's C++ client library: one TCP connection to `troupe serve`, many requests at once, and a
// streaming API. Blocking and single-threaded: events of other requests are buffered while one
// stream is read. Speaks docs/protocol.md through runtime/wire.
//
//   troupe::client::client c("127.0.0.1", 7711);
//   auto s = c.generate(req);                        // sends; returns a stream
//   while (auto tok = s.next()) std::cout << tok->text;
//   const auto& done = s.done();                     // finish_reason, usage, timings
//   done.usage.cached_prompt_tokens                  // prompt tokens served from the prefix cache
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/wire/frame.hpp"
#include "runtime/wire/protocol.hpp"

namespace troupe::client {

// The server answered with an `error` event.
class request_error : public std::runtime_error {
 public:
  explicit request_error(wire::wire_error e)
      : std::runtime_error(std::string(wire::to_string(e.code)) + ": " + e.message), error_(std::move(e)) {}
  const wire::wire_error& error() const noexcept { return error_; }

 private:
  wire::wire_error error_;
};

// A raw framed connection (also what the tests use to send malformed bytes).
class connection {
 public:
  // Throws troupe::error(io_error) naming the address when it cannot connect.
  connection(const std::string& host, uint16_t port);
  ~connection();
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  void send(const wire::request& r);
  void send_raw(std::string_view bytes);  // anything, framed or not
  // The next event; nullopt after `timeout`. Throws troupe::error(io_error) when the server
  // closed the connection, invalid_input for an undecodable event.
  std::optional<wire::event> next_event(std::chrono::milliseconds timeout = std::chrono::hours(24));
  // True when the server has closed the connection (waits up to `timeout` for it).
  bool closed_by_peer(std::chrono::milliseconds timeout);
  void close();
  int fd() const noexcept { return fd_; }

 private:
  int fd_ = -1;
  wire::frame_decoder decoder_{0xffffffffu};
};

class client;

// One generate request's events, in order. With n > 1 the completions' events interleave, each
// naming its `index`; the stream ends after the last completion's done.
class stream {
 public:
  // The next token event; nullopt once the request is done (then done() is valid). Throws
  // request_error when the server refused the request.
  std::optional<wire::token_event> next();
  const wire::done_event& done();  // reads to the end if needed; with n > 1 completion 0's
  const std::vector<wire::done_event>& dones();  // every completion's done, by index
  const std::string& id() const noexcept { return id_; }

 private:
  friend class client;
  stream(client* c, std::string id, int32_t n) : client_(c), id_(std::move(id)), dones_(static_cast<size_t>(n)) {}
  client* client_;
  std::string id_;
  std::vector<wire::done_event> dones_;
  size_t num_done_ = 0;
  bool finished() const noexcept { return num_done_ == dones_.size(); }
};

struct completion {
  std::string text;       // with separate_reasoning: the answer only
  std::string reasoning;  // with separate_reasoning: the thinking (<think>...</think>)
  std::vector<int32_t> ids;
  std::vector<wire::logprob_info> logprobs;  // one per id when the request asked for logprobs
  wire::done_event done;
};

class client {
 public:
  client(const std::string& host, uint16_t port) : conn_(host, port) {}

  // Sends a generate (an empty id gets one like "cpp-1") and returns its stream.
  stream generate(wire::generate_request r);
  // generate() read to the end (a request with n == 1).
  completion complete(wire::generate_request r);
  // Every completion of a request with any n (or a batch of prompts: completion p * n + j), by index.
  std::vector<completion> complete_all(wire::generate_request r);
  // An embed request (r.embed set; r.n becomes its number of inputs, as the `embed` op decodes):
  // each input's embedding, in input order. request_error when the server refused it or an input failed.
  std::vector<std::vector<float>> embed(wire::generate_request r);
  // A rerank request (r.rerank set; r.n becomes its number of documents): each document's score,
  // in document order. request_error when the server refused it or a document failed.
  std::vector<double> rerank(wire::generate_request r);
  // A classify request (r.embed set; sent with task classify): each input's label probabilities
  // and likeliest label, in input order (a sequence classifier's; others refuse it).
  struct classification {
    std::vector<float> probs;
    std::string label;
  };
  std::vector<classification> classify(wire::generate_request r);
  void cancel(const std::string& id);
  std::vector<int32_t> tokenize(wire::tokenize_request r);
  wire::health_event health();
  std::vector<wire::model_info> models();

  // The next event of request `id` (others are buffered).
  wire::event next_for(const std::string& id);
  connection& raw() noexcept { return conn_; }

 private:
  friend class stream;
  wire::event simple(wire::request r, std::string& id);
  connection conn_;
  std::map<std::string, std::deque<wire::event>> pending_;
  uint64_t next_id_ = 1;
};

}  // namespace troupe::client
