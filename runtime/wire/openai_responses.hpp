// OpenAI's Responses API (POST /v1/responses), as vLLM serves it (with its store on): the
// request's `input` (a text, or a list of messages, function calls, their outputs and reasoning
// items), `instructions`, flat function `tools`, `text.format` and `max_output_tokens` become a
// chat completion's fields and run through the chat parser (so every limit and refusal of
// /v1/chat/completions holds); the generate's events become a `response` object, or its typed
// server-sent events (response.created ... response.completed). Agent frameworks and coding
// agents written against OpenAI (the Agents SDK, Codex) speak this API rather than chat. With a
// response_store, `store: true` (OpenAI's default) keeps the response, and `previous_response_id`
// continues a stored one's conversation.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/wire/conversation_store.hpp"
#include "runtime/wire/openai.hpp"
#include "runtime/wire/response_store.hpp"

namespace troupe::wire::openai {

struct parsed_responses {
  parsed_request chat;  // the request as /v1/chat/completions would take it (chat.ok(): parsed)
  // The request's settings a response object repeats (instructions, tools, temperature, ...), as
  // a JSON object's text.
  std::string echo_json = "{}";
  bool logprobs = false;  // include has "message.output_text.logprobs"
  // `store` asked for (the default) and a store given: the response is to be kept, with
  // `conversation`, the input items it answers (a previous response's conversation first).
  bool store = false;
  std::shared_ptr<const nlohmann::ordered_json> conversation;
  // `background: true` (needs `store`): the response runs with no client waiting for it; the
  // gateway answers at once with it queued (runtime/wire/background_response.hpp).
  bool background = false;
  // `conversation` (OpenAI's Conversations API): its items went ahead of the input; once the
  // response ends, `new_items` (the request's own input) and its output join it (add_to_conversation).
  std::optional<std::string> conversation_id;
  std::shared_ptr<const nlohmann::ordered_json> new_items;
  bool ok() const noexcept { return chat.ok(); }
};

// `id` ("resp_...") becomes the generate's id and the response's. `store`: where responses are
// kept (null: nowhere; `previous_response_id` is then 404 as every unknown id); `conversations`:
// where conversations are (null: none, `conversation` is 404). Never throws.
parsed_responses parse_responses(std::string_view body, const served_models& models, const std::string& id,
                                 response_store* store = nullptr, conversation_store* conversations = nullptr);

// A response given `conversation` ended (set_on_final's `response`): the request's input items
// (parsed_responses::new_items) and
// the response's output items as the client saw them join the conversation, unless it failed or
// the conversation is gone. False when they were not added (gone, failed, or over the store's size).
// `text`: the response's response_text() when the caller has it (one dump for store and conversation).
bool add_to_conversation(conversation_store& store, const std::string& conversation_id,
                         const nlohmann::ordered_json& new_items, const nlohmann::ordered_json& response,
                         const std::string* text = nullptr);

// A response's JSON text as it is sent and kept (invalid UTF-8 replaced by U+FFFD).
std::string response_text(const nlohmann::ordered_json& response);

// Refuses (detail::refusal) unless `items` is an array of input items the Responses API serves,
// naming a bad one `name`[i].
void check_input_items(const nlohmann::ordered_json& items, std::string_view name);

// An item as OpenAI lists it: "type" message when left out, a message's text content as one part.
nlohmann::ordered_json listed_item(nlohmann::ordered_json item);

// A list page (OpenAI's: object "list", data, first_id, last_id, has_more) of `items` (each with an
// "id", in their order): `order` "desc" (the default) or "asc", `limit` 1..100 (20), `after` the id
// of the item the page follows, which must be one of `owner`'s. A bad parameter is a 400 naming it.
struct list_page_answer {
  int status = 200;
  std::string body;
};
list_page_answer list_page(nlohmann::ordered_json items, const std::string& owner, const std::optional<std::string>& order,
                           const std::optional<std::string>& limit, const std::optional<std::string>& after);

// Keeps a response (set_on_final's) in `store` under `id`: the conversation it answered and its
// output items as the client saw them (its JSON text read back, so a token's broken UTF-8 is
// U+FFFD there too and every item is valid input again), and that text for GET. A background
// response is kept queued (`finished` false) when it starts, then again when it ends, with its
// streamed events when it had them (without them when they would not fit the store). `text`: as
// for add_to_conversation.
void keep_response(response_store& store, const std::string& id, const nlohmann::ordered_json& conversation,
                   const nlohmann::ordered_json& response,
                   std::shared_ptr<const std::vector<std::string>> events = nullptr, bool finished = true,
                   const std::string* text = nullptr);

// GET /v1/responses/{id}/input_items (OpenAI's): the input items stored response `e` answered,
// each with an id (one is made for an item sent without), as a list_page.
using input_items_page = list_page_answer;
input_items_page input_items(const response_store::entry& e, const std::string& response_id,
                             const std::optional<std::string>& order, const std::optional<std::string>& limit,
                             const std::optional<std::string>& after);

// The response to one parsed Responses request, fed its generate's events in order (one
// completion: the API has no `n`). `think_end`: the id of the token that closes Qwen3's thinking
// (</think>), or -1: the tokens up to it count as usage.output_tokens_details.reasoning_tokens,
// and only those after it carry the answer's logprobs.
class responses_builder final : public reply_builder {
 public:
  responses_builder(const parsed_responses& p, int64_t created, token_bytes_fn token_bytes, int32_t think_end)
      : responses_builder(p, created, std::move(token_bytes), think_end, p.chat.req->stream) {}
  // stream: whether its generate streams (token events, then done), which need not be what the
  // client asked: a background response always builds its output token by token, so that it can
  // be read while it runs.
  responses_builder(const parsed_responses& p, int64_t created, token_bytes_fn token_bytes, int32_t think_end,
                    bool stream);

  std::string feed(const event& e) override;
  bool complete() const noexcept override { return complete_; }
  int status() const noexcept override { return status_; }
  bool streaming() const noexcept override { return stream_ && status_ == 200; }
  // Called once with the final response object when the response ends (completed, incomplete or
  // cancelled; failed too for a background response, which its client reads only from the store):
  // where the gateway stores it.
  void set_on_final(std::function<void(const nlohmann::ordered_json&)> f) { on_final_ = std::move(f); }
  // The response object now, with `status` and the output so far (a streamed response builds its
  // items as the tokens come; a whole one only at the end): GET of a running background response.
  nlohmann::ordered_json snapshot(const char* status) const;

 private:
  // One output item: reasoning, the answer message, or a function call (in output order).
  struct item {
    enum class kind : uint8_t { reasoning, message, call } k = kind::message;
    std::string id;
    std::string text;           // the reasoning, the message's text, or the call's arguments
    std::string name, call_id;  // a call's
    std::vector<std::pair<int32_t, logprob_info>> logprobs;  // a message's tokens
    bool done = false;
    bool cut = false;  // ended by the response's end (max_output_tokens, cancel), not by its own
  };
  std::string on_token(const token_event& t);
  std::string on_done(done_event&& d);
  std::string on_error(const wire_error& e);
  std::string begin();                      // streaming: response.created and .in_progress, once
  std::string open(item::kind k);           // ends the open item unless it is a `k`, opens a `k`
  std::string close_open();                 // ends the open item, if any
  std::string add_text(const std::string& text);  // the answer's text (and its tokens' logprobs)
  std::string add_call_piece(const tool_call_stream::call_piece& c);  // a streamed call's piece
  void count_id(int32_t id);                // an output token: thinking until </think>
  int64_t reasoning_tokens() const;
  std::string item_id(const char* prefix, size_t index) const;
  // One server-sent event of `type` (the JSON's type and sequence_number added to `fields`).
  std::string sse(const char* type, nlohmann::ordered_json fields);
  // With the output items so far. so_far: an unfinished item holds its text so far (GET of a running
  // response); else it is empty until done (the events' shape: deltas carry the text).
  nlohmann::ordered_json response_json(const char* status, bool so_far = false) const;
  nlohmann::ordered_json item_json(const item& it, bool so_far = false) const;
  nlohmann::ordered_json part_json(const item& it, bool so_far) const;  // a message's output_text part
  nlohmann::ordered_json logprob_json(const std::pair<int32_t, logprob_info>& lp) const;

  std::string id_, model_;
  std::function<void(const nlohmann::ordered_json&)> on_final_;
  std::shared_ptr<const nlohmann::ordered_json> echo_;  // parsed_responses::echo_json, parsed once
  int64_t created_;
  bool stream_, has_tools_, want_logprobs_, background_;
  std::optional<forced_tool_choice> forced_;
  token_bytes_fn token_bytes_;
  int32_t think_end_;
  std::vector<item> items_;  // the last one is open until done
  std::string held_;         // at the end: the text not sent yet, which may be (or is) tool calls
  call_holder calls_;        // streaming: text that may be tool calls, held back or streamed
  std::vector<std::pair<int32_t, logprob_info>> pending_logprobs_;  // tokens whose text is not out yet
  bool in_thought_ = true;     // no </think> yet
  bool saw_reasoning_ = false;
  int64_t thought_ids_ = 0;    // tokens up to </think>
  usage_info usage_;
  int64_t seq_ = 0;            // sequence_number of the next event
  bool begun_ = false, finished_ = false, complete_ = false;
  int status_ = 200;
};

}  // namespace troupe::wire::openai
