#include "runtime/wire/anthropic_messages.hpp"

#include <algorithm>
#include <limits>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <utility>

#include "runtime/wire/openai_detail.hpp"

namespace troupe::wire::anthropic {

using namespace openai::detail;
using openai::api_error;

namespace {

std::string block_type(const ojson& b, const std::string& where) {
  want(b, b.is_object(), where, "an object");
  return need_string(b, where, "type");
}

[[noreturn]] void unsupported_block(const std::string& type, const std::string& where) {
  refuse("unsupported", where + ".type",
         "content blocks of type '" + type + "' are not supported here: Qwen3 reads text (text, tool_use, "
         "tool_result and thinking blocks are served)");
}

// A string, or text blocks (joined by "\n", as vLLM joins a message's text parts). `cache_control`
// (prompt caching hints: the prefix cache needs none) and `citations` are accepted.
std::string text_of(const ojson& c, const std::string& where) {
  if (c.is_string()) return c.get<std::string>();
  want(c, c.is_array(), where, "a string or an array of content blocks");
  std::string text;
  for (size_t i = 0; i < c.size(); ++i) {
    const std::string bw = where + "[" + std::to_string(i) + "]";
    const std::string type = block_type(c[i], bw);
    if (type != "text") unsupported_block(type, bw);
    only_keys(c[i], bw, {"type", "text", "cache_control", "citations"});
    if (i > 0) text += '\n';
    text += need_string(c[i], bw, "text");
  }
  return text;
}

// Anthropic's messages as chat turns: a user turn's tool_result blocks become tool turns (in
// order, its text after them as a user turn); an assistant turn's thinking becomes
// reasoning_content, its tool_use blocks tool_calls (input as JSON text, which the chat parser
// reads back into the value the template prints).
ojson chat_messages(const ojson& msgs, const std::string& system) {
  want(msgs, msgs.is_array(), "messages", "an array");
  if (msgs.empty()) refuse("invalid_value", "messages", "field 'messages' must not be empty");
  ojson out = ojson::array();
  if (!system.empty()) out.push_back({{"role", "system"}, {"content", system}});
  for (size_t i = 0; i < msgs.size(); ++i) {
    const std::string where = "messages[" + std::to_string(i) + "]";
    const ojson& m = msgs[i];
    want(m, m.is_object(), where, "an object");
    only_keys(m, where, {"role", "content"});
    const std::string role = need_string(m, where, "role");
    if (role != "user" && role != "assistant")
      refuse("invalid_value", where + ".role", "field '" + where + ".role' is '" + role + "'; expected user or assistant");
    const ojson& c = need(m, where, "content");
    const std::string cw = where + ".content";
    if (c.is_string()) {
      out.push_back({{"role", role}, {"content", c}});
      continue;
    }
    want(c, c.is_array(), cw, "a string or an array of content blocks");
    std::string text, reasoning;
    bool has_text = false;
    ojson calls = ojson::array();
    const auto flush_user_text = [&] {
      if (has_text) out.push_back({{"role", "user"}, {"content", std::exchange(text, {})}});
      has_text = false;
    };
    for (size_t j = 0; j < c.size(); ++j) {
      const std::string bw = cw + "[" + std::to_string(j) + "]";
      const std::string type = block_type(c[j], bw);
      const ojson& b = c[j];
      if (type == "text") {
        only_keys(b, bw, {"type", "text", "cache_control", "citations"});
        if (has_text) text += '\n';
        text += need_string(b, bw, "text");
        has_text = true;
      } else if (role == "user" && type == "tool_result") {
        only_keys(b, bw, {"type", "tool_use_id", "content", "is_error", "cache_control"});
        need_string(b, bw, "tool_use_id");
        if (auto e = b.find("is_error"); e != b.end() && !e->is_null()) want(*e, e->is_boolean(), bw + ".is_error", "a boolean");
        flush_user_text();
        auto rc = b.find("content");
        out.push_back({{"role", "tool"}, {"content", rc == b.end() || rc->is_null() ? std::string() : text_of(*rc, bw + ".content")}});
      } else if (role == "assistant" && type == "thinking") {
        only_keys(b, bw, {"type", "thinking", "signature"});
        reasoning += need_string(b, bw, "thinking");
      } else if (role == "assistant" && type == "redacted_thinking") {
        only_keys(b, bw, {"type", "data"});  // another model's encrypted thinking: nothing to read
      } else if (role == "assistant" && type == "tool_use") {
        only_keys(b, bw, {"type", "id", "name", "input", "cache_control"});
        const ojson& input = need(b, bw, "input");
        want(input, input.is_object(), bw + ".input", "an object");
        calls.push_back({{"id", need_string(b, bw, "id")},
                         {"type", "function"},
                         {"function", {{"name", need_string(b, bw, "name")}, {"arguments", dump(input)}}}});
      } else {
        if (type == "tool_result" || type == "tool_use" || type == "thinking" || type == "redacted_thinking")
          refuse("invalid_value", bw + ".type", "a " + type + " block belongs in " +
                                                    (type == "tool_result" ? "a user" : "an assistant") + " message");
        unsupported_block(type, bw);
      }
    }
    if (role == "user") {
      flush_user_text();
      if (c.empty()) refuse("invalid_value", cw, "field '" + cw + "' must not be empty");
      continue;
    }
    ojson a = {{"role", "assistant"}, {"content", text}};
    if (!reasoning.empty()) a["reasoning_content"] = reasoning;
    if (!calls.empty()) a["tool_calls"] = std::move(calls);
    out.push_back(std::move(a));
  }
  return out;
}

// Anthropic's tools ({"name", "description", "input_schema"}) in chat's form. Server tools
// (web search, code execution, computer use: a `type` with a version) run at Anthropic, not here.
ojson chat_tools(const ojson& tools) {
  want(tools, tools.is_array(), "tools", "an array");
  ojson out = ojson::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const ojson& t = tools[i];
    const std::string where = "tools[" + std::to_string(i) + "]";
    want(t, t.is_object(), where, "an object");
    if (auto ty = t.find("type"); ty != t.end() && !ty->is_null() && *ty != "custom") {
      want(*ty, ty->is_string(), where + ".type", "a string");
      refuse("unsupported", where + ".type",
             "tools of type '" + ty->get<std::string>() + "' run on Anthropic's servers and are not served here: "
             "give client tools (name, description, input_schema)");
    }
    only_keys(t, where, {"type", "name", "description", "input_schema", "cache_control", "strict"});
    out.push_back(chat_function_tool(t, where, "input_schema", true));
  }
  return out;
}

// tool_choice: auto, any ("required"), tool (a named function), none; disable_parallel_tool_use.
void chat_tool_choice(const ojson& v, ojson& c) {
  want(v, v.is_object(), "tool_choice", "an object");
  const std::string type = need_string(v, "tool_choice", "type");
  only_keys(v, "tool_choice", {"type", "name", "disable_parallel_tool_use"});
  if (auto p = v.find("disable_parallel_tool_use"); p != v.end() && !p->is_null()) {
    want(*p, p->is_boolean(), "tool_choice.disable_parallel_tool_use", "a boolean");
    c["parallel_tool_calls"] = !p->get<bool>();
  }
  if (type == "auto" || type == "none") c["tool_choice"] = type;
  else if (type == "any") c["tool_choice"] = "required";
  else if (type == "tool")
    c["tool_choice"] = {{"type", "function"}, {"function", {{"name", need_string(v, "tool_choice", "name")}}}};
  else
    refuse("invalid_value", "tool_choice.type", "field 'tool_choice.type' is '" + type + "'; expected auto, any, tool or none");
}

// The chat parser names chat's fields; the client sent Anthropic's.
void name_anthropic_fields(api_error& e) {
  static const std::pair<std::string_view, std::string_view> renamed[] = {
      {"stop", "stop_sequences"}, {"response_format", "output_format"}, {"tenant", "metadata.user_id"}};
  for (const auto& [from, to] : renamed)
    if (e.param == from) e.param = to;
  if (e.param.rfind("messages", 0) == 0) e.message += " (in the chat turns made from system and messages)";
}

}  // namespace

parsed_messages parse_messages(std::string_view body, const openai::served_models& models, const std::string& id,
                               bool count_tokens) {
  parsed_messages out;
  out.chat.model = models.base;
  try {
    const ojson b = parse_body(body);
    ojson c = ojson::object();  // the chat request
    std::string system;
    const ojson* msgs = nullptr;
    for (const auto& [k, v] : b.items()) {
      if (v.is_null()) continue;
      if (k == "model") {
        c[k] = v;
      } else if (k == "messages") {
        msgs = &v;
      } else if (k == "system") {
        system = text_of(v, "system");
      } else if (k == "tools") {
        c[k] = chat_tools(v);
      } else if (k == "tool_choice") {
        chat_tool_choice(v, c);
      } else if (k == "thinking") {
        // Qwen3 thinks or does not: enabled / disabled is enable_thinking, and an enabled block's
        // budget_tokens is the thinking_token_budget (then </think> is forced). Absent: the
        // model's default (thinks, unbounded but by max_tokens).
        want(v, v.is_object(), k, "an object");
        only_keys(v, k, {"type", "budget_tokens"});
        const std::string type = need_string(v, k, "type");
        if (type != "enabled" && type != "disabled")
          refuse("invalid_value", "thinking.type", "field 'thinking.type' is '" + type + "'; expected enabled or disabled");
        if (auto bt = v.find("budget_tokens"); bt != v.end() && !bt->is_null()) {
          want(*bt, bt->is_number_integer(), "thinking.budget_tokens", "an integer");
          if (bt->get<int64_t>() < 0 || bt->get<int64_t>() > std::numeric_limits<int32_t>::max())
            refuse("invalid_value", "thinking.budget_tokens",
                   "field 'thinking.budget_tokens' must be a count of tokens >= 0, not " + bt->dump());
          if (type == "enabled" && !count_tokens) c["thinking_token_budget"] = *bt;
        }
        c["chat_template_kwargs"] = {{"enable_thinking", type == "enabled"}};
      } else if (count_tokens) {
        refuse("unknown_field", k, "unknown field '" + k + "' for /v1/messages/count_tokens (it reads model, "
                                   "messages, system, tools, tool_choice and thinking)");
      } else if (k == "max_tokens") {
        want(v, v.is_number_integer(), k, "an integer");
        if (v.get<int64_t>() < 1) refuse("invalid_value", k, "field 'max_tokens' must be at least 1, not " + v.dump());
        c[k] = v;
      } else if (k == "stop_sequences") {
        want(v, v.is_array(), k, "an array of strings");
        for (const auto& s : v) {
          want(s, s.is_string(), k, "an array of strings");
          out.stop_sequences.push_back(s.get<std::string>());
        }
        if (!v.empty()) c["stop"] = v;
      } else if (k == "temperature" || k == "top_p" || k == "top_k" || k == "stream") {
        c[k] = v;
      } else if (k == "metadata") {
        want(v, v.is_object(), k, "an object");
        only_keys(v, k, {"user_id"});
        if (auto u = v.find("user_id"); u != v.end() && !u->is_null()) c["user"] = *u;  // the fair-share tenant
      } else if (k == "service_tier") {
        want(v, v.is_string(), k, "a string");  // one tier here
      } else if (k == "context_management") {
        want(v, v.is_object(), k, "an object");  // server-side context editing: the context is kept whole
      } else if (k == "container" || k == "mcp_servers") {
        refuse("unsupported", k, "'" + k + "' needs Anthropic's servers and is not served here");
      } else {
        refuse("unknown_field", k, "unknown field '" + k + "' for /v1/messages (docs/anthropic_api.md lists the fields served)");
      }
    }
    if (!msgs) refuse("missing_field", "messages", "a message needs field 'messages'");
    c["messages"] = chat_messages(*msgs, system);
    if (count_tokens) {
      ojson w = {{"v", protocol_version}, {"type", "tokenize"}, {"id", id}, {"messages", messages(c["messages"])}};
      if (c.contains("tools")) w["tools"] = c["tools"];
      if (c.contains("chat_template_kwargs")) chat_template_kwargs(c["chat_template_kwargs"], w);
      if (c.contains("model")) names_adapter(c["model"], models);
      auto d = decode_wire(w, out.error);
      if (d) out.count = std::get<tokenize_request>(std::move(*d));
      else name_anthropic_fields(out.error);
      return out;
    }
    if (!c.contains("max_tokens")) refuse("missing_field", "max_tokens", "a message needs field 'max_tokens'");
    // Which stop sequence ended the answer is part of the answer (stop_sequence): the text keeps
    // it, and the builder takes it off again.
    if (!out.stop_sequences.empty()) c["include_stop_str_in_output"] = true;
    parse_generate(openai::endpoint::chat, c, models, id, out.chat);
    if (!out.chat.ok()) {
      out.error = out.chat.error;
      name_anthropic_fields(out.error);
    }
  } catch (const refusal& r) {
    out.error = r.e;
    name_anthropic_fields(out.error);
  } catch (const std::exception& e) {
    out.error = {400, std::string("the request body cannot be read: ") + e.what(), "malformed", ""};
  }
  if (!out.ok()) out.chat.req.reset();
  return out;
}

std::string error_body(const api_error& e) {
  const char* type = e.status == 401   ? "authentication_error"
                     : e.status == 403 ? "permission_error"
                     : e.status == 404 ? "not_found_error"
                     : e.status == 413 ? "request_too_large"
                     : e.status == 429 ? "rate_limit_error"
                     : e.status == 503 ? "overloaded_error"
                     : e.status >= 500 ? "api_error"
                                       : "invalid_request_error";
  std::string message = e.message;
  if (!e.param.empty() && message.find(e.param) == std::string::npos) message = e.param + ": " + message;
  return dump(ojson{{"type", "error"}, {"error", {{"type", type}, {"message", message}}}});
}

std::string count_body(size_t input_tokens) { return dump(ojson{{"input_tokens", input_tokens}}); }

// ---- the answer -------------------------------------------------------------------------------

messages_builder::messages_builder(const parsed_messages& p)
    : id_(p.chat.req->id),
      model_(p.chat.model),
      stream_(p.chat.req->stream),
      has_tools_(!p.chat.req->tools_json.empty()),
      forced_(p.chat.forced_tools),
      stops_(p.stop_sequences) {
  // A forced call's output is all call: held back whole.
  if (stream_) calls_ = call_holder(call_holder::for_reply(has_tools_, forced_.has_value(), p.chat.stream_tool_arguments));
}

std::string messages_builder::sse(const char* type, ojson fields) const {
  ojson j = {{"type", type}};
  for (auto& [k, v] : fields.items()) j[k] = std::move(v);
  return std::string("event: ") + type + "\ndata: " + dump(j) + "\n\n";
}

ojson messages_builder::usage_json() const {
  // Anthropic counts prompt tokens read from its cache apart from input_tokens.
  return {{"input_tokens", usage_.prompt_tokens - usage_.cached_prompt_tokens},
          {"cache_creation_input_tokens", 0},
          {"cache_read_input_tokens", usage_.cached_prompt_tokens},
          {"output_tokens", usage_.completion_tokens}};
}

ojson messages_builder::block_json(const block& b, bool whole) const {
  switch (b.k) {
    case block::kind::thinking:
      return {{"type", "thinking"}, {"thinking", whole ? b.text : std::string()}, {"signature", ""}};
    case block::kind::text:
      return {{"type", "text"}, {"text", whole ? b.text : std::string()}};
    case block::kind::tool_use: {
      ojson input = ojson::object();
      if (whole) {
        // The arguments as written; a call cut short (max_tokens) or not an object keeps {}.
        auto parsed = ojson::parse(b.text, nullptr, false);
        if (parsed.is_object()) input = std::move(parsed);
      }
      return {{"type", "tool_use"}, {"id", b.id}, {"name", b.name}, {"input", std::move(input)}};
    }
  }
  return nullptr;
}

std::string messages_builder::begin(int64_t input_tokens) {
  if (begun_ || !stream_) return {};
  begun_ = true;
  usage_.prompt_tokens = input_tokens;
  ojson m = {{"id", id_},           {"type", "message"},        {"role", "assistant"},       {"model", model_},
             {"content", ojson::array()}, {"stop_reason", nullptr}, {"stop_sequence", nullptr}, {"usage", usage_json()}};
  return sse("message_start", {{"message", std::move(m)}});
}

std::string messages_builder::open(block::kind k) {
  std::string out;
  if (!blocks_.empty() && !blocks_.back().done) {
    if (blocks_.back().k == k) return out;
    out += close_open();
  }
  block b;
  b.k = k;
  blocks_.push_back(std::move(b));
  if (stream_) out += sse("content_block_start", {{"index", blocks_.size() - 1}, {"content_block", block_json(blocks_.back(), false)}});
  return out;
}

std::string messages_builder::close_open() {
  if (blocks_.empty() || blocks_.back().done) return {};
  blocks_.back().done = true;
  return stream_ ? sse("content_block_stop", {{"index", blocks_.size() - 1}}) : std::string();
}

std::string messages_builder::add_text(const std::string& text) {
  std::string out = open(block::kind::text);
  blocks_.back().text += text;
  if (stream_) out += sse("content_block_delta", {{"index", blocks_.size() - 1}, {"delta", {{"type", "text_delta"}, {"text", text}}}});
  return out;
}

std::string messages_builder::add_call(std::string name, std::string arguments, bool whole) {
  std::string out = close_open();
  block b;
  b.k = block::kind::tool_use;
  b.id = "toolu_" + id_.substr(id_.find('_') + 1) + "_" + std::to_string(blocks_.size());
  b.name = std::move(name);
  blocks_.push_back(std::move(b));
  if (stream_) out += sse("content_block_start", {{"index", blocks_.size() - 1}, {"content_block", block_json(blocks_.back(), false)}});
  auto& call = blocks_.back();
  call.text += arguments;
  if (stream_ && !arguments.empty())
    out += sse("content_block_delta",
               {{"index", blocks_.size() - 1}, {"delta", {{"type", "input_json_delta"}, {"partial_json", arguments}}}});
  if (whole) out += close_open();
  return out;
}

std::string messages_builder::push_streamed(std::string_view text) {
  auto p = calls_.push(text);
  std::string out = p.content.empty() ? std::string() : add_text(p.content);
  for (auto& c : p.calls) {
    if (c.begins) {
      out += add_call(c.name, c.arguments, false);
    } else if (!c.arguments.empty()) {
      blocks_.back().text += c.arguments;
      out += sse("content_block_delta",
                 {{"index", blocks_.size() - 1}, {"delta", {{"type", "input_json_delta"}, {"partial_json", c.arguments}}}});
    }
  }
  return out;
}

std::string messages_builder::release_stop(std::string_view text) {
  if (stops_.empty()) return std::string(text);
  stop_tail_ += text;
  // Hold back the longest tail that a stop sequence could begin with (or is).
  size_t keep = 0;
  for (const auto& s : stops_)
    for (size_t n = std::min(s.size(), stop_tail_.size()); n > keep; --n)
      if (stop_tail_.compare(stop_tail_.size() - n, n, s, 0, n) == 0) {
        keep = n;
        break;
      }
  std::string out = stop_tail_.substr(0, stop_tail_.size() - keep);
  stop_tail_.erase(0, stop_tail_.size() - keep);
  return out;
}

std::string messages_builder::on_token(const token_event& t) {
  if (t.index.value_or(0) != 0) return {};
  std::string out = begin(t.prompt_tokens.value_or(0));
  if (t.reasoning && !t.reasoning->empty()) {
    out += open(block::kind::thinking);
    blocks_.back().text += *t.reasoning;
    if (stream_)
      out += sse("content_block_delta",
                 {{"index", blocks_.size() - 1}, {"delta", {{"type", "thinking_delta"}, {"thinking", *t.reasoning}}}});
  }
  out += push_streamed(release_stop(t.text));
  // A streamed call whose arguments are whole ends now.
  if (calls_.streams_calls() && calls_.complete() == calls_.streamed() && !blocks_.empty() && !blocks_.back().done &&
      blocks_.back().k == block::kind::tool_use)
    out += close_open();
  return out;
}

std::string messages_builder::on_error(const wire_error& e) {
  complete_ = true;
  const api_error a = openai::from_wire(e);
  if (!begun_) {
    status_ = a.status;
    return anthropic::error_body(a);
  }
  return close_open() + "event: error\ndata: " + anthropic::error_body(a) + "\n\n";  // Anthropic's mid-stream error
}

std::string messages_builder::on_done(done_event&& d) {
  if (d.index.value_or(0) != 0) return {};
  if (d.reason == finish_reason::error && d.error && !begun_) return on_error(*d.error);
  std::string out = begin(d.usage.prompt_tokens);
  usage_ = d.usage;
  std::vector<tool_call> calls = std::move(d.tool_calls);
  // The stop sequence that ended the answer (the request kept it in the text) comes off the end
  // of the content not sent yet.
  std::optional<std::string> stop_sequence;
  const auto take_stop = [&](std::string& text) {
    if (d.reason != finish_reason::stop) return;
    for (const auto& s : stops_)
      if (text.size() >= s.size() && text.compare(text.size() - s.size(), s.size(), s) == 0) {
        stop_sequence = s;
        text.resize(text.size() - s.size());
        return;
      }
  };
  std::string tail;  // content text not sent yet
  if (!stream_ && d.has_output) {
    blocks_.clear();
    if (d.reasoning && !d.reasoning->empty()) {
      out += open(block::kind::thinking);
      blocks_.back().text = *d.reasoning;
    }
    tail = d.text;
    take_stop(tail);
  } else {
    std::string rest = std::exchange(stop_tail_, {});
    take_stop(rest);
    out += push_streamed(rest);  // the stream's last text goes the way its earlier text went
    tail = calls_.take_held();
  }
  const size_t streamed_calls = calls_.streamed();  // tool_use blocks opened as they streamed
  if (forced_ && d.reason != finish_reason::error)
    if (auto forced = openai::forced_tool_calls(*forced_, tail); !forced.empty()) {
      calls = std::move(forced);
      tail.clear();
    }
  if (!calls.empty()) tail = content_before_calls(tail);
  else if (streamed_calls > 0) tail.clear();  // the block itself, now calls
  if (!tail.empty()) out += add_text(tail);
  if (calls.empty() && streamed_calls == 0 && blocks_.empty()) out += open(block::kind::text);  // an empty answer
  out += close_open();
  for (size_t k = streamed_calls; k < calls.size(); ++k)
    out += add_call(std::move(calls[k].name), std::move(calls[k].arguments), true);
  complete_ = true;
  const bool used_tools = !calls.empty() || streamed_calls > 0;
  const char* stop_reason = d.reason == finish_reason::length ? "max_tokens"
                            : used_tools                      ? "tool_use"
                            : stop_sequence                   ? "stop_sequence"
                                                              : "end_turn";
  const ojson stop_seq = stop_sequence ? ojson(*stop_sequence) : ojson(nullptr);
  if (!stream_) {
    ojson content = ojson::array();
    for (const auto& b : blocks_) content.push_back(block_json(b, true));
    return dump(ojson{{"id", id_},
                      {"type", "message"},
                      {"role", "assistant"},
                      {"model", model_},
                      {"content", std::move(content)},
                      {"stop_reason", stop_reason},
                      {"stop_sequence", stop_seq},
                      {"usage", usage_json()}});
  }
  if (d.reason == finish_reason::error && d.error) {
    const api_error a = openai::from_wire(*d.error);
    return out + "event: error\ndata: " + anthropic::error_body(a) + "\n\n";
  }
  out += sse("message_delta", {{"delta", {{"stop_reason", stop_reason}, {"stop_sequence", stop_seq}}}, {"usage", usage_json()}});
  return out + sse("message_stop", ojson::object());
}

std::string messages_builder::feed(const event& e) {
  if (complete_) return {};
  if (const auto* t = std::get_if<token_event>(&e)) return on_token(*t);
  if (const auto* d = std::get_if<done_event>(&e)) return on_done(done_event(*d));
  if (const auto* err = std::get_if<wire_error>(&e)) return on_error(*err);
  return {};
}

}  // namespace troupe::wire::anthropic
