// One generate request's replies as framed wire bytes: `token` events while it streams (or the
// whole output on `done` when it does not), then exactly one `done` with usage and timings.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "runtime/sampling/logprobs.hpp"
#include "runtime/serve/output_text.hpp"
#include "runtime/serve/reasoning_split.hpp"
#include "runtime/serve/tool_calls.hpp"
#include "runtime/wire/protocol.hpp"

namespace troupe::serve {

using clock = std::chrono::steady_clock;

// What a request asked of its output text beyond the tokens themselves.
struct output_rules {
  std::vector<std::string> stop = {};  // stop strings
  int32_t min_tokens = 0;         // stop strings are looked for only from this many tokens on
  bool find_tool_calls = false;   // the request offered tools: done carries the calls found
  // Set for requests with separate_reasoning (reasoning_split): the answer goes out as `text`
  // and the thinking as `reasoning`, tool calls read from the answer.
  std::optional<bool> reasoning_opened_in_prompt = std::nullopt;
  bool prompt_logprobs = false;  // done carries the prompt's logprobs (add_prompt_logprobs)
  // Requests with n > 1: which completion this response is (every event carries it).
  std::optional<int32_t> index = std::nullopt;
  // A rerank document: the one value set_embedding receives is its score (done's `score`).
  bool rerank = false;
  // A classify input: the values set_embedding receives are its label probabilities (done's
  // `probs`), and `label` names the likeliest of these labels.
  std::vector<std::string> labels = {};
  bool include_stop_str_in_output = false;  // a matched stop string stays at the text's end
  bool skip_special_tokens = true;          // false: special tokens' text is part of the output
  // With find_tool_calls: the format the model writes calls in, and (qwen3_coder) the request's
  // tools, whose schemas type the values.
  tool_call_format tool_format = tool_call_format::hermes;
  std::string tools_json = {};
  // return_prompt_ids: the prompt's ids, on the first token event and on done.
  std::optional<std::vector<int32_t>> prompt_ids = std::nullopt;
};

class response {
 public:
  response(std::string client_id, bool stream, const tokenizer* tok, output_rules rules, int64_t prompt_tokens,
           clock::time_point received);

  // Appends what token `id` adds. Returns true when a stop string ended the request: the done
  // event (reason stop) is appended too and later tokens are ignored.
  // logprobs: the token's, when the request asked for them (token event, or done when not streaming).
  bool add_token(int32_t id, clock::time_point now, std::string& out, const token_logprobs* logprobs = nullptr);
  // Appends the final events (held-back text, then done). No-op when already done.
  void finish(wire::finish_reason why, std::optional<wire::wire_error> err, clock::time_point now,
              std::string& out);
  // The logprobs of the next prompt tokens (in prompt order, from the second token on).
  void add_prompt_logprobs(std::span<const token_logprobs> lps);
  void set_queue_time(clock::time_point first_scheduled);
  // An embed request's input: done carries this embedding (and no text or ids); a rerank
  // document's (output_rules::rerank): its score, v[0].
  void set_embedding(std::vector<float> v) { embedding_ = std::move(v); }
  // Prompt tokens whose K/V came from the prefix cache (usage.cached_prompt_tokens).
  void set_cached_prompt_tokens(int64_t n) noexcept { cached_prompt_tokens_ = n; }

  bool done() const noexcept { return done_; }
  // Once done: the done event's reason, usage, timings and error (not its output).
  const wire::done_event& outcome() const noexcept { return outcome_; }
  int64_t completion_tokens() const noexcept { return static_cast<int64_t>(ids_.size()); }
  const std::string& client_id() const noexcept { return id_; }
  std::optional<int32_t> index() const noexcept { return index_; }

 private:
  double ms_since_received(clock::time_point t) const;

  std::string id_;
  bool stream_;
  output_text text_;
  int64_t prompt_tokens_;
  int64_t cached_prompt_tokens_ = 0;
  clock::time_point received_;
  std::optional<clock::time_point> first_token_, first_scheduled_;
  std::vector<int32_t> ids_;
  std::vector<wire::logprob_info> logprobs_;  // when not streaming
  std::optional<std::vector<wire::logprob_info>> prompt_logprobs_;  // requests with prompt_logprobs
  std::optional<std::vector<int32_t>> prompt_ids_;                  // requests with return_prompt_ids
  std::optional<std::vector<float>> embedding_;                     // embed requests
  std::string all_text_;  // when not streaming, or when looking for tool calls
  std::optional<reasoning_split> split_;
  std::string all_reasoning_;  // when not streaming and separating reasoning
  bool find_tool_calls_;
  tool_call_format tool_format_;
  std::string tools_json_;
  std::optional<int32_t> index_;
  bool rerank_;
  std::vector<std::string> labels_;  // output_rules::labels
  bool done_ = false;
  wire::done_event outcome_;
};

}  // namespace troupe::serve
