// The OpenAI-compatible HTTP API (docs/openai_api.md) as plain data translation: a request body
// of POST /v1/chat/completions or /v1/completions becomes the protocol's generate_request (and
// runs through the same strict decoder, so every limit and error of docs/protocol.md holds), and
// the events of that generate become OpenAI's response: one JSON body, or server-sent events.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/wire/openai_tool_choice.hpp"
#include "runtime/wire/protocol.hpp"
#include "runtime/wire/tool_call_stream.hpp"

namespace troupe::wire::openai {

enum class endpoint : uint8_t { chat, completion, embeddings, rerank, score, classify };

// An error as OpenAI's API reports it: the HTTP status and {"error": {message, type, param, code}}.
struct api_error {
  int status = 400;
  std::string message;
  std::string code;   // the protocol's error code name (invalid_value, ...) or model_not_found
  std::string param;  // the offending field when known, else ""
};
std::string error_body(const api_error& e);
int http_status(error_code code) noexcept;
api_error from_wire(const wire_error& e);

// The model names a request may give: the served model, or a LoRA adapter the server loaded
// (which becomes the request's `adapter`).
struct served_models {
  std::string base;
  std::vector<std::string> adapters;
  int64_t max_model_len = 0;
  std::vector<std::string> aliases = {};  // other names of the base model (--served-model-name a b)
  // model.reasoning_effort_budgets: a chat's reasoning_effort (the Responses API's reasoning.effort)
  // as a thinking_token_budget, e.g. {"low", 1024}; empty: efforts other than "none" change nothing.
  std::vector<std::pair<std::string, int32_t>> effort_budgets = {};
};

struct parsed_request {
  std::optional<generate_request> req;  // set on success
  api_error error;
  bool include_usage = false;  // stream_options.include_usage: a last chunk carries the usage
  // stream_options.continuous_usage_stats (vLLM's; with include_usage): every chunk carries its
  // choice's usage so far.
  bool continuous_usage = false;
  bool include_reasoning = true;  // chat: the thinking comes back as reasoning_content
  // completions: `echo`: the prompt comes back ahead of the completion (and its tokens' logprobs
  // with `logprobs`); with max_tokens 0 (scoring a text) the one token generated is left out.
  bool echo = false;
  // chat: vLLM's `echo`: the final message, when it is the assistant's (a prefill), comes back
  // ahead of the answer's content (whole, or on each choice's first chunk); "": nothing.
  std::string chat_echo;
  bool prompt_only = false;
  // vLLM's prompt_logprobs (chat, completions; not streamed): each prompt token's logprob, rank
  // and the most likely tokens there, as vLLM answers them (a choice's, or a chat body's).
  bool prompt_logprobs = false;
  // vLLM's return_token_ids (chat, completions): the prompt's token ids and each choice's
  // generated ids come back beside the text (prompt_token_ids, token_ids).
  bool return_token_ids = false;
  // vLLM's return_tokens_as_token_ids (chat, completions): logprobs name each token "token_id:ID"
  // instead of its text, so tokens that are not whole UTF-8 characters stay apart.
  bool tokens_as_ids = false;
  bool base64 = false;  // embeddings: encoding_format "base64" (little-endian float32 bytes)
  int32_t top_n = 0;    // rerank: the best N results only; 0: every document
  // chat: tool_choice "required" or a named function (openai_tool_choice.hpp): the output is the
  // calls' JSON, answered as tool_calls.
  std::optional<forced_tool_choice> forced_tools;
  // Streamed chat with tools: each call's arguments stream as the model writes them
  // (tool_call_stream.hpp), which only Qwen3's JSON calls allow; the gateway sets it when the
  // server reads that format (model_facts::tool_format). Otherwise calls come whole at the end.
  bool stream_tool_arguments = false;
  std::string model;  // the name to answer with
  // vLLM's `request_id` (chat, completions, embeddings, rerank, score): the client's id for the
  // request; the gateway makes the response's id of it unless an X-Request-Id header names one.
  std::optional<std::string> request_id;
  bool ok() const noexcept { return req.has_value(); }
};

// A client's request id (X-Request-Id, `request_id`): 1..256 visible ASCII characters, so it can
// go into a header line, a log line and a response id as it is.
bool valid_request_id(std::string_view id) noexcept;

// `id` becomes the generate's id (the response's id). Never throws.
parsed_request parse_request(endpoint ep, std::string_view body, const served_models& models, const std::string& id);

// GET /v1/models.
std::string models_body(const served_models& models, int64_t created);
// GET /v1/models/{name} (OpenAI's models.retrieve): that model's object, or nothing for a name
// not served.
std::optional<std::string> model_body(const served_models& models, std::string_view name, int64_t created);

// POST /invocations (SageMaker's, as vLLM serves it): the path of the endpoint a body is for, by
// its fields: messages: chat; prompt: completions; input: embeddings; query: rerank; text_1 or
// queries: score. Nothing when it has none of them (or is not a JSON object).
std::optional<std::string_view> invocation_path(std::string_view body);

// The raw bytes of a token id (for logprobs' token texts); may be empty for unknown ids.
using token_bytes_fn = std::function<std::string(int32_t)>;

// What the gateway holds while it answers one HTTP request that runs a generate: fed that
// generate's events in order, it returns the bytes to send (see response_builder).
class reply_builder {
 public:
  virtual ~reply_builder() = default;
  virtual std::string feed(const event& e) = 0;
  virtual bool complete() const noexcept = 0;  // the response is finished
  virtual int status() const noexcept = 0;     // its HTTP status
  // text/event-stream (chunked) rather than one application/json body.
  virtual bool streaming() const noexcept = 0;
};

// The response to one parsed request, fed that generate's events in order. For a streaming
// request each feed returns the SSE text to send ("data: {...}\n\n" ..., "data: [DONE]\n\n" at the
// end); otherwise nothing until the end, then the whole JSON body. complete() says the response
// is finished; status() is its HTTP status (an error before any output makes it non-200 and the
// body an error_body, streaming or not).
class response_builder final : public reply_builder {
 public:
  response_builder(endpoint ep, const parsed_request& p, int64_t created, token_bytes_fn token_bytes);

  std::string feed(const event& e) override;
  // For an `echo` request: prompt p's text and token ids (the gateway tokenizes a text prompt);
  // p > 0 only in a batch (generate_request::prompts).
  void set_echo_prompt(size_t p, std::string text, std::vector<int32_t> ids);

  bool complete() const noexcept override { return complete_; }
  int status() const noexcept override { return status_; }
  // text/event-stream while streaming with status 200, else application/json.
  bool streaming() const noexcept override { return stream_ && status_ == 200; }
  bool started() const noexcept { return started_; }

 private:
  struct choice {
    bool role_sent = false;
    bool done = false;
    std::string text, reasoning;  // non-streaming: collected
    std::vector<int32_t> ids;
    std::vector<logprob_info> logprobs;
    std::vector<float> embedding;  // embeddings: this input's; classify: its label probabilities
    std::string label;             // classify: the likeliest label
    double score = 0;              // rerank: this document's
    call_holder calls;             // streaming: text that may be tool calls, held back or streamed
    int64_t prompt_tokens = 0, tokens = 0;   // continuous usage: the prompt's, and generated so far
    done_event last;
  };
  using json = nlohmann::ordered_json;
  // id, object, created, model: what every body and chunk begins with.
  json head(const char* object) const;
  // One SSE event: a chunk with one choice; `delta` is chat's delta object or a completion's text.
  // `ids` (return_token_ids): the token event whose ids (and, on a choice's first, the prompt's)
  // the chunk carries; null: none.
  std::string chunk(int32_t index, json delta, json logprobs, const char* finish_reason, const token_event* ids = nullptr);
  // A chat chunk's delta: the role on the choice's first chunk, with chat_echo as its content.
  json delta_for(choice& ch) const;
  // Adds `text` to the delta's content (after an echo already there).
  static void add_content(json& delta, const std::string& text);
  std::string on_token(const token_event& t);
  std::string on_done(done_event&& d);
  std::string on_error(const wire_error& e);
  std::string finish_stream();
  std::string final_body();
  std::string embeddings_body();
  std::string rerank_body();
  std::string score_body();
  std::string classify_body();
  // The endpoint's logprobs object for `ids`, one logprob_info each.
  json logprobs_json(const std::vector<int32_t>& ids, const std::vector<logprob_info>& lps) const;
  // vLLM's prompt_logprobs: null for the first prompt token, then per token {"ID": {logprob, rank,
  // decoded_token}} with the token first, then the most likely ones (ranks 1, 2, ...).
  json prompt_logprobs_json(const std::optional<std::vector<logprob_info>>& pl) const;
  // The completions form over ids whose logprobs may be missing (null: the first prompt token).
  json completion_logprobs(const std::vector<int32_t>& ids, const std::vector<const logprob_info*>& lps) const;
  // Choice `index`'s calls as OpenAI's tool_calls, the first being call `first` of the choice; a
  // streamed delta numbers them with `index`.
  json tool_calls_json(const std::vector<tool_call>& calls, size_t index, bool streamed, size_t first = 0) const;
  std::string call_id(size_t choice, size_t k) const;
  // A streamed call's piece (tool_call_stream) as a chunk's delta.
  std::string call_chunk(int32_t index, choice& ch, const tool_call_stream::call_piece& c);

  endpoint ep_;
  std::string id_, model_;
  int64_t created_;
  bool stream_, include_usage_, continuous_usage_, include_reasoning_, has_tools_, want_logprobs_, echo_, prompt_only_, base64_,
      prompt_logprobs_, return_token_ids_;
  std::string chat_echo_;                       // chat echo: the assistant's prefill, ahead of each answer
  std::vector<std::string> echo_text_;          // by prompt
  std::vector<std::vector<int32_t>> echo_ids_;  // by prompt
  int32_t n_;           // completions in all (generate_request::sequences)
  int32_t per_prompt_;  // of them, each prompt's (n)
  std::vector<bool> prompt_counted_;  // usage: a prompt's tokens count once, whatever its n
  token_bytes_fn token_bytes_;
  std::vector<choice> choices_;
  int32_t remaining_;
  std::vector<std::string> documents_;  // rerank: echoed in the results
  int32_t top_n_ = 0;
  std::optional<forced_tool_choice> forced_;  // chat with a forced tool call
  usage_info usage_;
  bool complete_ = false, started_ = false;
  int status_ = 200;
};

}  // namespace troupe::wire::openai
