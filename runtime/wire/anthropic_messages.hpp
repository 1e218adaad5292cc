// Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens), as vLLM, SGLang and
// llama.cpp serve it beside OpenAI's: what Claude Code and Anthropic's SDKs speak, so they can run
// on Qwen3 (Qwen3-Coder above all). The request's `system`, `messages` (text, tool_use,
// tool_result and thinking blocks), `tools`, `tool_choice`, `thinking` and sampling fields become
// a chat completion's and run through the chat parser, so every limit and refusal of
// /v1/chat/completions holds; the generate's events become a `message` (thinking, text and
// tool_use content blocks) or Anthropic's typed server-sent events.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/wire/openai.hpp"
#include "runtime/wire/openai_tool_choice.hpp"
#include "runtime/wire/protocol.hpp"
#include "runtime/wire/tool_call_stream.hpp"

namespace troupe::wire::anthropic {

struct parsed_messages {
  openai::parsed_request chat;             // the request as /v1/chat/completions takes it
  std::optional<tokenize_request> count;   // count_tokens: its prompt's tokenize request instead
  std::vector<std::string> stop_sequences;  // to name the one that ended the answer
  openai::api_error error;                 // set when refused
  bool ok() const noexcept { return chat.ok() || count.has_value(); }
};

// `id` ("msg_...") becomes the generate's (or tokenize's) id and the message's. `count_tokens`:
// the body of /v1/messages/count_tokens (no max_tokens; nothing generated). Never throws.
parsed_messages parse_messages(std::string_view body, const openai::served_models& models, const std::string& id,
                               bool count_tokens = false);

// Anthropic's error shape: {"type": "error", "error": {"type", "message"}}, the type from the
// status (invalid_request_error, authentication_error, not_found_error, rate_limit_error, ...).
std::string error_body(const openai::api_error& e);

// {"input_tokens": n}: count_tokens' answer.
std::string count_body(size_t input_tokens);

// The answer to one parsed request, fed its generate's events in order.
class messages_builder final : public openai::reply_builder {
 public:
  explicit messages_builder(const parsed_messages& p);

  std::string feed(const event& e) override;
  bool complete() const noexcept override { return complete_; }
  int status() const noexcept override { return status_; }
  bool streaming() const noexcept override { return stream_ && status_ == 200; }

 private:
  struct block {
    enum class kind : uint8_t { thinking, text, tool_use } k = kind::text;
    std::string text;      // the thinking, the text, or the call's arguments (JSON text)
    std::string id, name;  // a tool_use's
    bool done = false;
  };
  std::string on_token(const token_event& t);
  std::string on_done(done_event&& d);
  std::string on_error(const wire_error& e);
  std::string begin(int64_t input_tokens);  // streaming: message_start, once
  std::string open(block::kind k);          // ends the open block unless it is a `k`, opens a `k`
  std::string close_open();
  std::string add_text(const std::string& text);
  std::string add_call(std::string name, std::string arguments, bool whole);
  std::string release_stop(std::string_view text);  // text, less a tail that may be a stop sequence
  std::string push_streamed(std::string_view text);  // through calls_: the text it releases, then call pieces
  std::string sse(const char* type, nlohmann::ordered_json fields) const;
  nlohmann::ordered_json block_json(const block& b, bool whole) const;
  nlohmann::ordered_json usage_json() const;

  std::string id_, model_;
  bool stream_, has_tools_;
  std::optional<openai::forced_tool_choice> forced_;
  std::vector<std::string> stops_;
  std::vector<block> blocks_;  // the last one is open until done
  std::string stop_tail_;      // content text that may be the start of a stop sequence, held back
  call_holder calls_;  // streaming: text that may be tool calls, held back or streamed
  usage_info usage_;
  bool begun_ = false, complete_ = false;
  int status_ = 200;
};

}  // namespace troupe::wire::anthropic
