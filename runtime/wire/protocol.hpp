// The client protocol as plain data (docs/protocol.md is its specification): the requests a
// client sends, the events the server answers with, and every error code. Version 1.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace troupe::wire {

// Every request carries `v`; the server answers any other value with unsupported_version.
inline constexpr uint32_t protocol_version = 1;

// Machine-readable error codes; the wire form is the snake_case name (to_string).
enum class error_code : uint8_t {
  malformed,            // not msgpack, not a map, trailing bytes, non-string keys, empty frame
  frame_too_large,      // length prefix above max_frame_bytes; the connection is closed after it
  unsupported_version,  // `v` is not protocol_version
  unknown_type,         // `type` names no request kind
  unknown_field,        // a field this request kind does not have (the message names it)
  missing_field,        // a required field is absent
  wrong_type,           // a field has the wrong msgpack type
  invalid_value,        // well-typed but out of range (max_tokens 0, top_p 1.5, ...)
  invalid_utf8,         // a string field is not valid UTF-8
  duplicate_id,         // a generate reuses the id of a request still running on this connection
  unknown_id,           // cancel names no running request of this connection
  prompt_too_long,      // prompt tokens + 1 > max_model_len
  too_many_requests,    // per-connection or server-wide queue limit reached
  unsupported,          // valid but not served here (text prompt without a tokenizer, ...)
  shutting_down,        // the server is draining and takes no new requests
  forbidden,            // an admin request without the server's admin token, or admin disabled
  idle_timeout,         // no request for [server] idle_timeout_ms; the connection is closed after it
  internal,             // a server-side failure (an actor failed); not the client's fault
};
inline constexpr int num_error_codes = static_cast<int>(error_code::internal) + 1;

std::string_view to_string(error_code code) noexcept;
std::optional<error_code> parse_error_code(std::string_view name) noexcept;

struct wire_error {
  error_code code = error_code::internal;
  std::string message;
  std::string id;  // the request's id when it could be read, else empty
};

// ---- requests (client -> server) -------------------------------------------------------------

struct chat_message {
  std::string role;  // system | user | assistant | tool
  std::string content;
  std::string reasoning_content;  // optional; assistant turns only
  // Optional, assistant turns only: the calls the model made, as a JSON array of
  // {"type": "function", "function": {"name", "arguments"}} (OpenAI's form) or {"name", "arguments"};
  // "" = none. JSON text because the chat template prints it as given.
  std::string tool_calls_json;
  friend bool operator==(const chat_message&, const chat_message&) = default;
};

enum class prompt_kind : uint8_t { text, ids, messages };

// Sampling fields a request may set; absent ones come from the model's generation_config.json.
struct sampling_fields {
  std::optional<double> temperature, top_p, min_p, repetition_penalty, presence_penalty,
      frequency_penalty;
  std::optional<int32_t> top_k;
  std::optional<uint64_t> seed;
  friend bool operator==(const sampling_fields&, const sampling_fields&) = default;
};

// Structured output: the generated text must match this (vLLM's structured_outputs, OpenAI's
// response_format). none: free text.
struct structured_output {
  enum class kind : uint8_t { none, json_schema, json_object, regex, choice, grammar };
  kind k = kind::none;
  std::string spec;                  // json_schema: the schema as JSON text; regex; grammar (GBNF)
  std::vector<std::string> choices;  // choice: the output is exactly one of these
  friend bool operator==(const structured_output&, const structured_output&) = default;
};

// An `embed` request (docs/protocol.md; OpenAI's /v1/embeddings): each input's embedding, the last
// token's final hidden state, cut to `dimensions` and scaled to unit length unless `normalize` is
// false (docs/engine.md, "Embeddings"). It rides in a generate_request so that it takes the
// generate path: input i is completion i of n = the number of inputs, and its done event carries
// `embedding` (and `index` i when there are several inputs).
struct embed_fields {
  std::vector<std::string> texts;         // text inputs (encoded with the tokenizer's special tokens)
  std::vector<std::vector<int32_t>> ids;  // or token-id inputs: one of the two is given
  std::optional<int32_t> dimensions;      // keep the first N values (Matryoshka models)
  bool normalize = true;
  // `task: "classify"` (vLLM's pooling task; /classify): each input's done carries `probs` (the
  // softmax of a sequence classifier's label logits, the sigmoid of one label's) and `label` (the
  // likeliest label's name) instead of `embedding`. dimensions and normalize do not apply.
  bool classify = false;
  friend bool operator==(const embed_fields&, const embed_fields&) = default;
};

// A `rerank` request (docs/protocol.md; vLLM's /v1/rerank): how relevant each document is to the
// query, as a Qwen3-Reranker judges it: the model card's prompt (system, `<Instruct>`, `<Query>`,
// `<Document>`, an empty think block) and, at its last token, P(yes) = softmax over the logits of
// "yes" and "no" (serve::build_rerank). Document i is completion i of n = the number of documents,
// and its done event carries `score` (and `index` i when there are several).
struct rerank_fields {
  // One query for every document, or one per document (wire `queries`: vLLM's pairwise /v1/score).
  std::vector<std::string> queries;
  std::vector<std::string> documents;
  std::optional<std::string> instruction;  // absent: the model card's default (web search)
  const std::string& query_for(size_t document) const { return queries.size() == 1 ? queries[0] : queries[document]; }
  friend bool operator==(const rerank_fields&, const rerank_fields&) = default;
};

// One prompt of a batch (generate_request::prompts): a text or token ids.
struct batch_prompt {
  prompt_kind kind = prompt_kind::text;  // text or ids
  std::string text;
  std::vector<int32_t> ids;
  friend bool operator==(const batch_prompt&, const batch_prompt&) = default;
};

struct generate_request {
  std::string id;
  std::optional<embed_fields> embed;   // set: an embed request (the fields below but id, priority,
                                       // tenant, deadline_ms and n are unused)
  std::optional<rerank_fields> rerank;  // set: a rerank request (likewise)
  prompt_kind kind = prompt_kind::text;
  std::string prompt;                  // kind == text
  std::vector<int32_t> prompt_ids;     // kind == ids
  std::vector<chat_message> messages;  // kind == messages
  std::optional<bool> enable_thinking; // messages only
  // messages only: the template's generation prompt (the assistant's turn opened), or instead the
  // model continuing the final message (assistant prefill; chat_template::render_continuing).
  bool add_generation_prompt = true;
  bool continue_final_message = false;
  // messages only: the tools the model may call, a JSON array of OpenAI-style function tools
  // ({"type": "function", "function": {"name", "description", "parameters"}}), rendered by the chat
  // template; the done event then carries the calls the model made. "" = none.
  std::string tools_json;
  // messages only: vLLM's chat_template_kwargs besides enable_thinking, a JSON object whose keys
  // become the chat template's variables (a custom template's switches); "" = none.
  std::string template_kwargs_json;
  // messages only: vLLM's per-request chat_template (Jinja text) instead of the server's; served
  // only with model.trust_request_chat_template (--trust-request-chat-template). "" = the server's.
  std::string chat_template;
  sampling_fields sampling;
  std::optional<int32_t> max_tokens;   // absent: the server's default_max_tokens
  std::vector<std::string> stop;
  bool include_stop_str_in_output = false;  // vLLM's: a matched stop string stays at the text's end
  bool skip_special_tokens = true;  // vLLM's: false keeps special tokens' text (<|im_end|>) in the output
  std::vector<int32_t> stop_ids;
  bool ignore_eos = false;
  // vLLM's return_token_ids: the prompt's token ids (after the chat template) come back, on the
  // first token event and on done, so a client (an RL trainer) holds exactly what the model read.
  bool return_prompt_ids = false;
  bool stream = true;
  int32_t priority = 0;                // lower is served first (vLLM's convention)
  std::string tenant;
  std::string adapter;                 // a LoRA adapter the server loaded (troupe serve --lora); "": the base model
  // vLLM's cache_salt: prefix caching shares this request's KV blocks only with requests that give
  // the same salt (per-tenant isolation of cache-hit timing); "": none.
  std::string cache_salt;
  std::optional<uint32_t> deadline_ms; // relative to the server receiving the request
  // Report each generated token's log-probability and those of the `logprobs` most likely
  // tokens (0..20) under the model's own distribution; absent: none.
  std::optional<int32_t> logprobs;
  // Qwen3's thinking apart from its answer: token events (or done) carry the text inside
  // <think>...</think> as `reasoning` and only the answer as `text` (vLLM's qwen3 reasoning parser).
  bool separate_reasoning = false;
  // Which tokens may come (vLLM's SamplingParams / OpenAI's logit_bias): stop ids and stop strings
  // wait until min_tokens tokens are out; only allowed_token_ids (when given) are sampled; each
  // logit_bias entry (id, bias in [-100, 100]) is added to that id's logit.
  std::optional<int32_t> min_tokens;
  std::vector<int32_t> allowed_token_ids;
  std::vector<std::pair<int32_t, double>> logit_bias;
  std::vector<std::string> bad_words;  // texts the output may not contain (vLLM's bad_words)
  // Each prompt token's log-probability given the tokens before it, and those of the
  // `prompt_logprobs` most likely tokens there (0..20), on done (vLLM's prompt_logprobs).
  std::optional<int32_t> prompt_logprobs;
  structured_output structured;
  // Completions to generate for this prompt (OpenAI's and vLLM's `n`): each is its own sequence
  // (choice i samples with seed + i when a seed is given), its events carry `index` = i, and the
  // prompt is computed once when prefix caching is on.
  int32_t n = 1;
  // vLLM's truncate_prompt_tokens (generate and embed): keep only the last k tokens of each
  // prompt (of each input); -1: as many as fit (max_model_len - 1). Absent: a prompt too long is
  // refused.
  std::optional<int32_t> truncate_prompt_tokens;
  // OpenAI Responses' truncation "auto" (messages prompts): when the rendered prompt does not fit
  // max_model_len, its oldest turns are dropped (from the first message after the leading system
  // ones up to the next user message, as few turns as it takes) until it does.
  bool truncate_messages = false;
  // vLLM's thinking_token_budget: at most this many tokens inside Qwen3's think block (opened by
  // the prompt or by the model); then </think> is forced and the model answers. -1 or absent: none.
  std::optional<int32_t> thinking_token_budget;
  // A batch (vLLM's and OpenAI's list of prompts for /v1/completions): these prompts instead of
  // prompt / prompt_ids, each as if it were the request's only one, with the same fields; its n
  // completions are completions p * n .. p * n + n - 1 of the request. Empty: one prompt.
  std::vector<batch_prompt> prompts;
  // vLLM's use_beam_search: the n completions are the n best beams of a beam search of width n
  // (runtime/serve/beam_search.hpp), best first, scored by cumulative log-probability over the
  // length to the power length_penalty; they come whole at the end (no token events before).
  bool use_beam_search = false;
  double length_penalty = 1.0;
  // The sequences the request runs (and the completions its events index): n per prompt.
  int32_t sequences() const noexcept { return n * static_cast<int32_t>(prompts.empty() ? 1 : prompts.size()); }
  friend bool operator==(const generate_request&, const generate_request&) = default;
};

struct cancel_request {
  std::string id;  // the id of the generate to cancel
  friend bool operator==(const cancel_request&, const cancel_request&) = default;
};

struct tokenize_request {
  std::string id;
  prompt_kind kind = prompt_kind::text;  // text or messages
  std::string prompt;
  std::vector<chat_message> messages;
  std::optional<bool> enable_thinking;
  bool add_generation_prompt = true;    // as in generate_request
  bool continue_final_message = false;  // as in generate_request
  std::string tools_json;  // as in generate_request
  std::string template_kwargs_json;  // as in generate_request
  std::string chat_template;         // as in generate_request
  friend bool operator==(const tokenize_request&, const tokenize_request&) = default;
};

struct health_request {
  std::string id;
  friend bool operator==(const health_request&, const health_request&) = default;
};

struct models_request {
  std::string id;
  friend bool operator==(const models_request&, const models_request&) = default;
};

// Admin: replace the scheduling policy of a running server (docs/plugins.md). No request is
// dropped; the answer is a `policy` event or an error (forbidden, invalid_value).
struct set_policy_request {
  std::string id;
  std::string policy;  // a policy name (fcfs, fair-share, ...) or a path to a plugin .so
  std::string config;  // the policy's key=value config ("" = its defaults)
  std::string token;   // must equal the server's admin token
  friend bool operator==(const set_policy_request&, const set_policy_request&) = default;
};

using request = std::variant<generate_request, cancel_request, tokenize_request, health_request,
                             models_request, set_policy_request>;

// ---- events (server -> client) ---------------------------------------------------------------

enum class finish_reason : uint8_t { stop, length, cancelled, deadline, error };
std::string_view to_string(finish_reason r) noexcept;
std::optional<finish_reason> parse_finish_reason(std::string_view name) noexcept;

// A token's log-probability and the most likely alternatives (id, logprob), most likely first.
struct logprob_info {
  double logprob = 0;
  std::vector<std::pair<int32_t, double>> top;
  // A prompt token's entry (prompt_logprobs) names the token and its rank, vLLM's: how many
  // tokens the model found at least as likely there (1: the most likely).
  std::optional<int32_t> id = std::nullopt, rank = std::nullopt;
  friend bool operator==(const logprob_info&, const logprob_info&) = default;
};

struct token_event {
  std::string id;
  std::string text;          // UTF-8 delta; may be empty while a character is incomplete
  std::vector<int32_t> ids;  // the token ids this event reports (usually one)
  std::optional<logprob_info> logprobs;  // requests with `logprobs`: of ids[0]
  std::optional<std::string> reasoning;  // requests with separate_reasoning: the thinking delta
  std::optional<int32_t> index;          // requests with n > 1: which completion
  // The completion's first token event: its prompt's tokens (what done's usage.prompt_tokens will
  // say), so a client can count usage as the stream goes (OpenAI's continuous_usage_stats).
  std::optional<int64_t> prompt_tokens;
  std::optional<std::vector<int32_t>> prompt_ids = std::nullopt;  // the first too, with return_prompt_ids
  friend bool operator==(const token_event&, const token_event&) = default;
};

struct usage_info {
  int64_t prompt_tokens = 0;
  int64_t cached_prompt_tokens = 0;
  int64_t completion_tokens = 0;
  friend bool operator==(const usage_info&, const usage_info&) = default;
};

struct timing_info {
  double queue_ms = 0;  // received -> first scheduled
  double ttft_ms = 0;   // received -> first token sent
  double total_ms = 0;  // received -> done
  friend bool operator==(const timing_info&, const timing_info&) = default;
};

// A call the model made (Qwen3 writes <tool_call>{"name": ..., "arguments": {...}}</tool_call>).
struct tool_call {
  std::string name;
  std::string arguments;  // JSON text of the arguments object, as OpenAI's API carries it
  friend bool operator==(const tool_call&, const tool_call&) = default;
};

struct done_event {
  std::string id;
  finish_reason reason = finish_reason::stop;
  usage_info usage;
  timing_info timings;
  bool has_output = false;   // stream == false: the whole text and ids ride on done
  std::string text;
  std::optional<std::string> reasoning;  // stream == false with separate_reasoning
  std::vector<int32_t> ids;
  // Requests with tools: each well-formed <tool_call> block of the output, in order (the text
  // itself still carries them). Empty when the model called none.
  std::vector<tool_call> tool_calls;
  // stream == false with `logprobs`: one per id of `ids`.
  std::vector<logprob_info> logprobs;
  // Requests with prompt_logprobs: one per prompt token after the first (the first has no
  // context to be predicted from; on the wire it is a nil ahead of these).
  std::optional<std::vector<logprob_info>> prompt_logprobs;
  std::optional<wire_error> error;  // reason == error
  std::optional<int32_t> index;     // requests with n > 1: which completion ended
  std::optional<std::vector<float>> embedding;  // embed requests: this input's embedding
  std::optional<double> score;                  // rerank requests: this document's P(yes)
  std::optional<std::vector<float>> probs;      // classify requests: one per label
  std::optional<std::string> label;             // classify requests: the likeliest label's name
  std::optional<std::vector<int32_t>> prompt_ids;  // requests with return_prompt_ids
  friend bool operator==(const done_event& a, const done_event& b) {
    auto same_err = a.error.has_value() == b.error.has_value() &&
                    (!a.error || (a.error->code == b.error->code &&
                                  a.error->message == b.error->message));
    return a.id == b.id && a.reason == b.reason && a.usage == b.usage && a.timings == b.timings &&
           a.has_output == b.has_output && a.text == b.text && a.reasoning == b.reasoning && a.ids == b.ids &&
           a.tool_calls == b.tool_calls && a.logprobs == b.logprobs && a.prompt_logprobs == b.prompt_logprobs &&
           a.index == b.index && a.embedding == b.embedding && a.score == b.score && a.probs == b.probs &&
           a.label == b.label && a.prompt_ids == b.prompt_ids &&
           same_err;
  }
};

struct tokenize_event {
  std::string id;
  std::vector<int32_t> ids;
};

struct health_event {
  std::string id;
  std::string status;  // ok | draining
  int64_t running = 0;
  int64_t waiting = 0;
};

struct model_info {
  std::string name;
  int64_t max_model_len = 0;
  int64_t vocab_size = 0;
  std::string parent;  // a LoRA adapter: the base model's name (generate's `adapter` takes `name`); "": a base model
};

struct models_event {
  std::string id;
  std::vector<model_info> models;
};

// The answer to set_policy: the policy now in charge and the one it replaced.
struct policy_event {
  std::string id;
  std::string policy;
  std::string previous;
  friend bool operator==(const policy_event&, const policy_event&) = default;
};

using event = std::variant<token_event, done_event, wire_error, tokenize_event, health_event,
                           models_event, policy_event>;

}  // namespace troupe::wire
