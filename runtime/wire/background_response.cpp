#include "runtime/wire/background_response.hpp"

#include <charconv>

#include "runtime/wire/openai_detail.hpp"

namespace troupe::wire::openai {

using ojson = nlohmann::ordered_json;

using detail::dump;  // broken UTF-8 as U+FFFD, as every answer is written

background_response::background_response(const parsed_responses& p, int64_t created, token_bytes_fn token_bytes,
                                         int32_t think_end, std::shared_ptr<response_store> store,
                                         std::shared_ptr<conversation_store> conversations)
    : id_(p.chat.req->id),
      store_(std::move(store)),
      conversation_(p.conversation ? p.conversation : std::make_shared<const ojson>(ojson::array())),
      conversations_(std::move(conversations)),
      conversation_id_(p.conversation_id),
      new_items_(p.new_items),
      builder_(p, created, std::move(token_bytes), think_end, /*stream=*/true),
      stream_(p.chat.req->stream) {
  builder_.set_on_final([this](const ojson& r) { final_ = r; });
  keep_response(*store_, id_, *conversation_, builder_.snapshot("queued"), nullptr, false);
}

std::string background_response::created_json() const { return dump(builder_.snapshot("queued")); }

std::string background_response::current_json() const {
  if (complete_) return dump(*final_);
  return dump(builder_.snapshot(started_ ? "in_progress" : "queued"));
}

void background_response::feed(const event& e) {
  if (complete_) return;
  started_ = true;
  std::string out;
  try {
    out = builder_.feed(e);
  } catch (const std::exception& x) {  // never expected: this response fails, not the gateway
    ojson r = builder_.snapshot("failed");
    r["error"] = {{"code", "internal"}, {"message", std::string("cannot build the response: ") + x.what()}};
    final_ = r;
    if (stream_)
      out = "event: response.failed\ndata: " +
            dump(ojson{{"type", "response.failed"}, {"sequence_number", events_->size()}, {"response", r}}) + "\n\n";
    complete_ = true;
  }
  if (stream_)  // the builder writes whole events, each ending in a blank line (kept if asked for)
    for (size_t pos = 0; pos < out.size();) {
      size_t end = out.find("\n\n", pos);
      end = end == std::string::npos ? out.size() : end + 2;
      events_->push_back(out.substr(pos, end - pos));
      pos = end;
    }
  if (!complete_ && !builder_.complete()) return;
  complete_ = true;
  if (!final_) {  // the builder always gives a background response's final one; stay safe
    final_ = builder_.snapshot("failed");
    (*final_)["error"] = {{"code", "internal"}, {"message", "the response ended without a final state"}};
  }
  const std::string text = response_text(*final_);  // one dump for the store and the conversation
  keep_response(*store_, id_, *conversation_, *final_, stream_ ? events_ : nullptr, true, &text);
  if (conversations_ && conversation_id_)
    add_to_conversation(*conversations_, *conversation_id_, new_items_ ? *new_items_ : ojson::array(), *final_, &text);
}

std::string events_after(const std::vector<std::string>& events, int64_t starting_after) {
  std::string out;
  for (size_t i = starting_after < 0 ? 0 : static_cast<size_t>(starting_after) + 1; i < events.size(); ++i) out += events[i];
  return out;
}

stream_query parse_stream_query(const std::optional<std::string>& stream, const std::optional<std::string>& starting_after) {
  stream_query q;
  if (stream) {
    if (*stream == "true") q.stream = true;
    else if (*stream != "false")
      q.error = api_error{400, "query parameter 'stream' must be true or false, not '" + *stream + "'", "invalid_value", "stream"};
  }
  if (starting_after && !q.error) {
    const char* b = starting_after->data();
    const char* e = b + starting_after->size();
    auto [p, ec] = std::from_chars(b, e, q.starting_after);
    if (ec != std::errc() || p != e || b == e || q.starting_after < -1)
      q.error = api_error{400, "query parameter 'starting_after' must be an event's sequence number (an integer >= -1), not '" +
                                   *starting_after + "'",
                          "invalid_value", "starting_after"};
    else if (!q.stream)
      q.error = api_error{400, "query parameter 'starting_after' needs stream=true", "invalid_value", "starting_after"};
  }
  return q;
}

}  // namespace troupe::wire::openai
