// A background response (the Responses API's `background: true`, as OpenAI and vLLM serve it): it
// runs with no client connection tied to it, so a long answer survives its client going away.
// Its creator is answered at once with it queued; the gateway feeds it its generate's events;
// clients read it (GET /v1/responses/{id}), follow its events when it was created with `stream`
// (GET ?stream=true&starting_after=N, from any connection, any number of times) and cancel it.
// It keeps itself in the response store: queued when made (so GET, input_items and a cancel find
// it), final when it ends (failed too: its client has nowhere else to learn why), with its events.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/wire/openai_responses.hpp"

namespace troupe::wire::openai {

class background_response {
 public:
  // `p`: a parsed request with p.background and p.store set; `store`: where it is kept (not null).
  // Its generate must stream (p.chat.req->stream set true after this, whatever the client asked):
  // the output is built token by token so that GET shows it while it runs.
  // `conversations`: where p.conversation_id is kept (its input and output join it at the end).
  background_response(const parsed_responses& p, int64_t created, token_bytes_fn token_bytes, int32_t think_end,
                      std::shared_ptr<response_store> store, std::shared_ptr<conversation_store> conversations = nullptr);
  background_response(const background_response&) = delete;
  background_response& operator=(const background_response&) = delete;

  const std::string& id() const noexcept { return id_; }
  bool streamed() const noexcept { return stream_; }  // created with stream: events() holds its events

  // What its creator is answered: the response queued, no output yet.
  std::string created_json() const;

  // One event of its generate, in order. A streamed response's new server-sent events are added to
  // events(); at the end the final response is kept in the store.
  void feed(const event& e);
  bool complete() const noexcept { return complete_; }

  // The response as GET answers it: queued until its first event, then in progress with the output
  // so far (its items grow token by token), then the final one.
  std::string current_json() const;

  // Its server-sent events so far ("event: TYPE\ndata: {...}\n\n" each), event i with
  // sequence_number i. Only a streamed response has any.
  const std::vector<std::string>& events() const noexcept { return *events_; }

 private:
  std::string id_;
  std::shared_ptr<response_store> store_;
  std::shared_ptr<const nlohmann::ordered_json> conversation_;
  std::shared_ptr<conversation_store> conversations_;
  std::optional<std::string> conversation_id_;
  std::shared_ptr<const nlohmann::ordered_json> new_items_;
  responses_builder builder_;
  bool stream_;
  bool started_ = false, complete_ = false;
  std::optional<nlohmann::ordered_json> final_;  // the final response, once complete
  std::shared_ptr<std::vector<std::string>> events_ = std::make_shared<std::vector<std::string>>();
};

// The events of a streamed response after sequence number `starting_after` (-1: all of them), as
// one text to send.
std::string events_after(const std::vector<std::string>& events, int64_t starting_after);

// GET /v1/responses/{id}'s query for following a stream: `stream` ("true" or "false", default
// false) and `starting_after` (a sequence number, default -1: from the first event). A bad value
// is a 400 naming the parameter.
struct stream_query {
  bool stream = false;
  int64_t starting_after = -1;
  std::optional<api_error> error;
};
stream_query parse_stream_query(const std::optional<std::string>& stream, const std::optional<std::string>& starting_after);

}  // namespace troupe::wire::openai
