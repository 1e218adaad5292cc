#include "runtime/wire/openai_responses.hpp"

#include <algorithm>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <utility>

#include "runtime/wire/openai_detail.hpp"

namespace troupe::wire::openai {

using namespace detail;

namespace {

// vLLM's sampling and output fields beyond OpenAI's, passed to the chat parser as they are.
bool chat_extra(const std::string& k) {
  static constexpr std::string_view extras[] = {
      "top_k", "min_p", "repetition_penalty", "presence_penalty", "frequency_penalty", "seed", "stop",
      "stop_token_ids", "min_tokens", "ignore_eos", "allowed_token_ids", "bad_words", "logit_bias", "priority",
      "structured_outputs", "guided_json", "guided_regex", "guided_choice", "guided_grammar",
      "include_stop_str_in_output", "skip_special_tokens", "truncate_prompt_tokens", "chat_template_kwargs",
      "cache_salt", "thinking_token_budget"};
  return std::find(std::begin(extras), std::end(extras), k) != std::end(extras);
}

// A message's or a call output's content: a string, or a list of text parts (joined by "\n", as
// vLLM joins a chat message's parts). Qwen3 reads text only: images, files and audio are refused
// naming the part.
std::string content_text(const ojson& c, const std::string& where) {
  if (c.is_string()) return c.get<std::string>();
  want(c, c.is_array(), where, "a string or an array of content parts");
  std::string text;
  for (size_t i = 0; i < c.size(); ++i) {
    const auto& part = c[i];
    const std::string pw = where + "[" + std::to_string(i) + "]";
    want(part, part.is_object(), pw, "an object");
    const std::string type = need_string(part, pw, "type");
    if (i > 0) text += '\n';
    if (type == "input_text" || type == "output_text" || type == "text") {
      // A response's own output parts come back as they were sent: annotations and logprobs too.
      only_keys(part, pw, {"type", "text", "annotations", "logprobs"});
      text += need_string(part, pw, "text");
    } else if (type == "refusal") {
      only_keys(part, pw, {"type", "refusal"});
      text += need_string(part, pw, "refusal");
    } else {
      refuse("unsupported", pw + ".type", "content parts of type '" + type + "' are not supported: Qwen3 reads text only");
    }
  }
  return text;
}

// `input` as chat messages (OpenAI's chat form), after `instructions` as the system turn.
// Function calls join the assistant turn before them (or open one); their outputs become tool
// turns; a reasoning item's text becomes the next assistant turn's reasoning_content, which
// Qwen3's template keeps for the turns after the last user message (a tool-calling loop).
// `input` is the items array: the first `num_previous` come from a stored conversation (already
// checked when they were stored; named `previous` should one fail), the rest are named `name`.
ojson input_messages(const ojson& input, const ojson* instructions, size_t num_previous,
                     std::string_view previous, std::string_view name) {
  ojson msgs = ojson::array();
  if (instructions) msgs.push_back({{"role", "system"}, {"content", instructions->get<std::string>()}});
  std::string reasoning;  // a reasoning item's text, for the next assistant turn
  bool in_assistant = false;  // the last message is an assistant turn calls may join
  const auto assistant_turn = [&](std::string content) {
    ojson m = {{"role", "assistant"}, {"content", std::move(content)}};
    if (!reasoning.empty()) m["reasoning_content"] = std::exchange(reasoning, {});
    msgs.push_back(std::move(m));
    in_assistant = true;
  };
  for (size_t i = 0; i < input.size(); ++i) {
    const auto& it = input[i];
    const std::string where = i < num_previous ? std::string(previous) + "[" + std::to_string(i) + "]"
                                               : std::string(name) + "[" + std::to_string(i - num_previous) + "]";
    want(it, it.is_object(), where, "an object");
    const auto t = it.find("type");
    if (t != it.end()) want(*t, t->is_string(), where + ".type", "a string");
    const std::string type = t != it.end() ? t->get<std::string>() : "message";
    if (type == "message") {
      only_keys(it, where, {"type", "role", "content", "id", "status", "phase"});
      const std::string role = need_string(it, where, "role");
      if (role != "user" && role != "system" && role != "developer" && role != "assistant")
        refuse("invalid_value", where + ".role",
               "field '" + where + ".role' is '" + role + "'; expected user, system, developer or assistant");
      std::string text = content_text(need(it, where, "content"), where + ".content");
      if (role == "assistant") {
        assistant_turn(std::move(text));
      } else {
        msgs.push_back({{"role", role}, {"content", std::move(text)}});
        in_assistant = false;
      }
    } else if (type == "function_call") {
      only_keys(it, where, {"type", "call_id", "name", "arguments", "id", "status"});
      ojson call = {{"id", need_string(it, where, "call_id")},
                    {"type", "function"},
                    {"function", {{"name", need_string(it, where, "name")}, {"arguments", need_string(it, where, "arguments")}}}};
      if (!in_assistant) assistant_turn("");
      auto& m = msgs.back();
      if (!m.contains("tool_calls")) m["tool_calls"] = ojson::array();
      m["tool_calls"].push_back(std::move(call));
    } else if (type == "function_call_output") {
      only_keys(it, where, {"type", "call_id", "output", "id", "status"});
      need_string(it, where, "call_id");
      msgs.push_back({{"role", "tool"}, {"content", content_text(need(it, where, "output"), where + ".output")}});
      in_assistant = false;
    } else if (type == "reasoning") {
      only_keys(it, where, {"type", "id", "summary", "content", "encrypted_content", "status"});
      if (auto c = it.find("content"); c != it.end() && !c->is_null()) {
        want(*c, c->is_array(), where + ".content", "an array");
        for (size_t k = 0; k < c->size(); ++k) {
          const std::string cw = where + ".content[" + std::to_string(k) + "]";
          want((*c)[k], (*c)[k].is_object(), cw, "an object");
          only_keys((*c)[k], cw, {"type", "text"});
          reasoning += need_string((*c)[k], cw, "text");
        }
      }
    } else if (type == "item_reference") {
      refuse("unsupported", where + ".type", "item_reference is not supported: send the item itself, or previous_response_id");
    } else {
      refuse("unsupported", where + ".type",
             "input items of type '" + type + "' are not supported (served: message, function_call, function_call_output, reasoning)");
    }
  }
  return msgs;
}

// Flat Responses function tools ({"type": "function", "name", "parameters", ...}) in chat's form.
ojson chat_tools(const ojson& tools) {
  want(tools, tools.is_array(), "tools", "an array");
  ojson out = ojson::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const auto& t = tools[i];
    const std::string where = "tools[" + std::to_string(i) + "]";
    want(t, t.is_object(), where, "an object");
    const std::string type = need_string(t, where, "type");
    if (type != "function")
      refuse("unsupported", where + ".type",
             "tools of type '" + type + "' are not supported: only function tools are served (the client runs them)");
    only_keys(t, where, {"type", "name", "description", "parameters", "strict"});
    out.push_back(chat_function_tool(t, where, "parameters", false));
  }
  return out;
}

ojson chat_tool_choice(const ojson& v) {
  if (v.is_string()) return v;  // "auto", "none", "required"; the chat parser judges others
  want(v, v.is_object(), "tool_choice", "a string or an object");
  const std::string type = need_string(v, "tool_choice", "type");
  if (type != "function")
    refuse("unsupported", "tool_choice.type", "tool_choice of type '" + type + "' is not supported (served: a function)");
  only_keys(v, "tool_choice", {"type", "name"});
  return {{"type", "function"}, {"function", {{"name", need_string(v, "tool_choice", "name")}}}};
}

// text.format as chat's response_format.
ojson chat_response_format(const ojson& text) {
  want(text, text.is_object(), "text", "an object");
  only_keys(text, "text", {"format", "verbosity"});
  auto f = text.find("format");
  if (f == text.end() || f->is_null()) return nullptr;
  want(*f, f->is_object(), "text.format", "an object");
  const std::string type = need_string(*f, "text.format", "type");
  if (type == "text") return nullptr;
  if (type == "json_object") {
    only_keys(*f, "text.format", {"type"});
    return {{"type", "json_object"}};
  }
  if (type != "json_schema")
    refuse("invalid_value", "text.format.type",
           "field 'text.format.type' is '" + type + "'; expected text, json_object or json_schema");
  only_keys(*f, "text.format", {"type", "name", "schema", "strict", "description"});
  ojson js = {{"name", need_string(*f, "text.format", "name")}, {"schema", need(*f, "text.format", "schema")}};
  if (auto s = f->find("strict"); s != f->end() && !s->is_null()) js["strict"] = *s;
  return {{"type", "json_schema"}, {"json_schema", std::move(js)}};
}

// The chat parser names chat's fields; the client sent the Responses API's.
void name_responses_fields(api_error& e) {
  static const std::pair<std::string_view, std::string_view> renamed[] = {
      {"max_tokens", "max_output_tokens"}, {"response_format", "text.format"}};
  for (const auto& [from, to] : renamed) {
    if (e.param.rfind(from, 0) == 0) e.param = std::string(to) + e.param.substr(from.size());
    for (size_t at = e.message.find(from); at != std::string::npos; at = e.message.find(from, at + to.size()))
      e.message.replace(at, from.size(), to);
  }
  if (e.param.rfind("messages", 0) == 0) e.message += " (in the chat turns made from instructions and input)";
}

}  // namespace

// `input` as an items array (a text is one user message).
ojson input_items(const ojson& input) {
  if (input.is_string()) return ojson::array({ojson{{"type", "message"}, {"role", "user"}, {"content", input}}});
  want(input, input.is_array(), "input", "a string or an array of input items");
  if (input.empty()) refuse("invalid_value", "input", "field 'input' must not be empty");
  return input;
}

parsed_responses parse_responses(std::string_view body, const served_models& models, const std::string& id,
                                 response_store* store, conversation_store* conversations) {
  parsed_responses out;
  out.chat.model = models.base;
  try {
    const ojson b = parse_body(body);
    ojson c = ojson::object();  // the chat request
    ojson echo = {{"instructions", nullptr}, {"max_output_tokens", nullptr}, {"metadata", ojson::object()},
                  {"parallel_tool_calls", true}, {"temperature", nullptr}, {"top_p", nullptr},
                  {"tool_choice", "auto"}, {"tools", ojson::array()}, {"text", {{"format", {{"type", "text"}}}}},
                  {"reasoning", nullptr}, {"store", false}, {"truncation", "disabled"}, {"user", nullptr},
                  {"service_tier", "auto"}, {"previous_response_id", nullptr}, {"background", false},
                  {"top_logprobs", 0}, {"max_tool_calls", nullptr}};
    const ojson* instructions = nullptr;
    const ojson* input = nullptr;
    const ojson* previous = nullptr;
    bool want_store = true;  // OpenAI's default
    bool truncate = false;   // truncation "auto"
    std::optional<std::string> conversation_id;  // `conversation`
    for (const auto& [k, v] : b.items()) {
      if (v.is_null()) continue;
      if (k == "model") {
        c[k] = v;
      } else if (k == "input") {
        input = &v;
      } else if (k == "instructions") {
        want(v, v.is_string(), k, "a string");
        instructions = &v;
        echo[k] = v;
      } else if (k == "max_output_tokens") {
        want(v, v.is_number_integer(), k, "an integer");
        if (v.get<int64_t>() < 1)
          refuse("invalid_value", k, "field 'max_output_tokens' must be at least 1, not " + v.dump());
        c["max_tokens"] = v;
        echo[k] = v;
      } else if (k == "temperature" || k == "top_p" || k == "parallel_tool_calls") {
        c[k] = v;
        echo[k] = v;
      } else if (k == "stream") {
        c[k] = v;
      } else if (k == "tools") {
        c[k] = chat_tools(v);
        echo[k] = v;
      } else if (k == "tool_choice") {
        c[k] = chat_tool_choice(v);
        echo[k] = v;
      } else if (k == "text") {
        if (auto rf = chat_response_format(v); !rf.is_null()) c["response_format"] = std::move(rf);
        echo[k] = v;
      } else if (k == "reasoning") {
        // As chat's reasoning_effort: "none" turns Qwen3's thinking off; summaries change nothing.
        want(v, v.is_object(), k, "an object");
        only_keys(v, k, {"effort", "summary", "generate_summary"});
        if (auto e = v.find("effort"); e != v.end() && !e->is_null()) {
          want(*e, e->is_string(), "reasoning.effort", "a string");
          c["reasoning_effort"] = *e;
        }
        echo[k] = v;
      } else if (k == "store") {
        want(v, v.is_boolean(), k, "a boolean");
        want_store = v.get<bool>();
      } else if (k == "metadata") {
        want(v, v.is_object() && v.size() <= 16, k, "an object of at most 16 keys");
        for (const auto& [mk, mv] : v.items()) want(mv, mv.is_string(), "metadata." + mk, "a string");
        echo[k] = v;
      } else if (k == "user" || k == "safety_identifier") {
        c[k] = v;  // the tenant fair-share policies share by
        echo[k] = v;
      } else if (k == "prompt_cache_key") {
        want(v, v.is_string(), k, "a string");  // prefix caching needs no key
        echo[k] = v;
      } else if (k == "service_tier") {
        want(v, v.is_string(), k, "a string");
        echo[k] = v;
      } else if (k == "include") {
        want(v, v.is_array(), k, "an array of strings");
        for (const auto& x : v) {
          want(x, x.is_string(), k, "an array of strings");
          if (x == "message.output_text.logprobs") out.logprobs = true;
        }
      } else if (k == "top_logprobs") {
        c[k] = v;
        echo[k] = v;
      } else if (k == "truncation") {
        want(v, v.is_string() && (v == "disabled" || v == "auto"), k, "\"disabled\" or \"auto\"");
        truncate = v == "auto";
        echo[k] = v;
      } else if (k == "background") {
        want(v, v.is_boolean(), k, "a boolean");
        out.background = v.get<bool>();
      } else if (k == "previous_response_id") {
        want(v, v.is_string(), k, "a string");
        previous = &v;
        echo[k] = v;
      } else if (k == "conversation") {  // "conv_..." or {"id": "conv_..."}
        want(v, v.is_string() || v.is_object(), k, "a conversation id or an object with its id");
        if (v.is_object()) only_keys(v, k, {"id"});
        conversation_id = v.is_string() ? v.get<std::string>() : need_string(v, k, "id");
      } else if (k == "prompt") {
        refuse("unsupported", k, "stored prompt templates are not supported: send 'instructions' and 'input'");
      } else if (k == "max_tool_calls") {
        // OpenAI's bound on built-in (hosted) tool calls, which are refused here: function calls,
        // which the client runs, are not counted by it. Accepted and repeated.
        want(v, v.is_number_integer() && v.get<int64_t>() >= 1, k, "a positive integer");
        echo[k] = v;
      } else if (k == "stream_options") {
        want(v, v.is_object(), k, "an object");
        only_keys(v, k, {"include_obfuscation"});  // no obfuscation padding is sent
      } else if (chat_extra(k)) {
        c[k] = v;
      } else {
        refuse("unknown_field", k,
               "unknown field '" + k + "' for /v1/responses (docs/openai_api.md lists the fields served)");
      }
    }
    if (!input) refuse("missing_field", "input", "a response needs field 'input'");
    ojson items = ojson::array();
    size_t num_previous = 0;
    if (conversation_id && previous)
      refuse("invalid_value", "conversation",
             "give only one of 'conversation' and 'previous_response_id' (a conversation holds the earlier turns)");
    if (conversation_id) {
      const bool found =
          conversations && conversations->read(*conversation_id, [&](const conversation& c) { items = c.items; });
      if (!found)
        refuse("not_found", "conversation",
               conversations ? "no conversation '" + *conversation_id + "' is kept here (never made, deleted, or "
                                                                         "dropped to keep server.conversations_store_bytes)"
                             : "no conversation '" + *conversation_id + "' is kept here: this server keeps none "
                                                                         "(server.conversations_store_bytes = 0)",
               404);
      num_previous = items.size();
      out.conversation_id = *conversation_id;
      echo["conversation"] = {{"id", *conversation_id}};
    }
    if (previous) {
      // As OpenAI's: the earlier conversation (its instructions not included) comes first.
      const std::string prev = previous->get<std::string>();
      auto found = store ? store->get(prev) : std::nullopt;
      if (!found)
        refuse("not_found", "previous_response_id",
               store ? "no response '" + prev + "' is stored here (never stored, deleted, or dropped to keep the "
                                                "store within server.responses_store_bytes)"
                     : "no response '" + prev + "' is stored here: this server stores none "
                                                "(server.responses_store_bytes = 0); send the whole conversation as 'input'",
               404);
      if (!found->finished)
        refuse("invalid_value", "previous_response_id",
               "response '" + prev + "' is a background response still running: continue it once it has finished "
                                     "(GET /v1/responses/{id} says when)");
      items = *found->items;
      num_previous = items.size();
    }
    const ojson given = input_items(*input);
    for (const auto& it : given) items.push_back(it);
    if (conversation_id) out.new_items = std::make_shared<const ojson>(given);
    c["messages"] = input_messages(items, instructions, num_previous,
                                   conversation_id ? "conversation's items" : "previous_response_id's input", "input");
    out.store = want_store && store != nullptr;
    echo["store"] = out.store;
    if (out.background && !out.store)  // its client reads it from the store only
      refuse(store ? "invalid_value" : "unsupported", "background",
             store ? "a background response needs store: true (it is read back with GET /v1/responses/{id})"
                   : "background responses need the response store, which this server does not keep "
                     "(server.responses_store_bytes = 0)");
    echo["background"] = out.background;
    if (out.store) out.conversation = std::make_shared<const ojson>(std::move(items));
    if (out.logprobs) c["logprobs"] = true;
    if (c.contains("top_logprobs") && !out.logprobs)
      refuse("invalid_value", "top_logprobs", "top_logprobs needs include: [\"message.output_text.logprobs\"]");
    out.echo_json = dump(echo);
    parse_generate(endpoint::chat, c, models, id, out.chat);
    if (!out.chat.ok()) name_responses_fields(out.chat.error);
    else out.chat.req->truncate_messages = truncate;
  } catch (const refusal& r) {
    out.chat.error = r.e;
    name_responses_fields(out.chat.error);
  } catch (const std::exception& e) {
    out.chat.error = {400, std::string("the request body cannot be read: ") + e.what(), "malformed", ""};
  }
  return out;
}

// ---- the response ---------------------------------------------------------------------------

namespace {

const char* status_of(finish_reason r) {
  switch (r) {
    case finish_reason::stop: return "completed";
    case finish_reason::length: return "incomplete";
    case finish_reason::cancelled:
    case finish_reason::deadline: return "cancelled";
    case finish_reason::error: return "failed";
  }
  return "completed";
}

}  // namespace

responses_builder::responses_builder(const parsed_responses& p, int64_t created, token_bytes_fn token_bytes,
                                     int32_t think_end, bool stream)
    : id_(p.chat.req->id),
      model_(p.chat.model),
      echo_(std::make_shared<const ojson>(ojson::parse(p.echo_json))),
      created_(created),
      stream_(stream),
      has_tools_(!p.chat.req->tools_json.empty()),
      want_logprobs_(p.logprobs),
      background_(p.background),
      forced_(p.chat.forced_tools),
      token_bytes_(std::move(token_bytes)),
      think_end_(think_end) {
  // A forced call's output is all call: streamed, it is held back whole, as a <tool_call> block is.
  if (stream_) calls_ = call_holder(call_holder::for_reply(has_tools_, forced_.has_value(), p.chat.stream_tool_arguments));
}

std::string responses_builder::item_id(const char* prefix, size_t index) const {
  // "resp_<hex>" -> "<prefix>_<hex>_<index>": unique within the response and across responses.
  return std::string(prefix) + "_" + id_.substr(id_.find('_') + 1) + "_" + std::to_string(index);
}

ojson responses_builder::logprob_json(const std::pair<int32_t, logprob_info>& lp) const {
  const std::string tok = token_bytes_(lp.first);
  ojson top = ojson::array();
  for (const auto& [id, v] : lp.second.top) {
    const std::string t = token_bytes_(id);
    top.push_back({{"token", t}, {"logprob", v}, {"bytes", bytes_json(t)}});
  }
  return {{"token", tok}, {"logprob", lp.second.logprob}, {"bytes", bytes_json(tok)}, {"top_logprobs", std::move(top)}};
}

ojson responses_builder::item_json(const item& it, bool so_far) const {
  const bool whole = it.done || so_far;
  const char* status = !it.done ? "in_progress" : it.cut ? "incomplete" : "completed";
  switch (it.k) {
    case item::kind::reasoning:
      return {{"id", it.id},
              {"type", "reasoning"},
              {"summary", ojson::array()},
              {"content", whole ? ojson::array({{{"type", "reasoning_text"}, {"text", it.text}}}) : ojson::array()},
              {"encrypted_content", nullptr},
              {"status", status}};
    case item::kind::message: {
      ojson content = ojson::array();
      if (whole) content.push_back(part_json(it, so_far));
      return {{"id", it.id}, {"type", "message"}, {"role", "assistant"}, {"status", status}, {"content", std::move(content)}};
    }
    case item::kind::call:
      return {{"id", it.id},
              {"type", "function_call"},
              {"call_id", it.call_id},
              {"name", it.name},
              {"arguments", whole ? it.text : std::string()},
              {"status", status}};
  }
  return nullptr;
}

ojson responses_builder::part_json(const item& it, bool so_far) const {
  const bool whole = it.done || so_far;
  ojson part = {{"type", "output_text"}, {"text", whole ? it.text : std::string()}, {"annotations", ojson::array()}};
  if (want_logprobs_) {
    ojson lps = ojson::array();
    if (whole)
      for (const auto& lp : it.logprobs) lps.push_back(logprob_json(lp));
    part["logprobs"] = std::move(lps);
  }
  return part;
}

ojson responses_builder::response_json(const char* status, bool so_far) const {
  ojson j = {{"id", id_}, {"object", "response"}, {"created_at", created_}, {"status", status}, {"error", nullptr},
             {"incomplete_details", nullptr}, {"model", model_}};
  for (const auto& [k, v] : echo_->items()) j[k] = v;
  ojson output = ojson::array();
  for (const auto& it : items_) output.push_back(item_json(it, so_far));
  j["output"] = std::move(output);
  if (finished_) {
    j["usage"] = {{"input_tokens", usage_.prompt_tokens},
                  {"input_tokens_details", {{"cached_tokens", usage_.cached_prompt_tokens}}},
                  {"output_tokens", usage_.completion_tokens},
                  {"output_tokens_details", {{"reasoning_tokens", reasoning_tokens()}}},
                  {"total_tokens", usage_.prompt_tokens + usage_.completion_tokens}};
  } else {
    j["usage"] = nullptr;
  }
  return j;
}

ojson responses_builder::snapshot(const char* status) const { return response_json(status, /*so_far=*/true); }

std::string responses_builder::sse(const char* type, ojson fields) {
  ojson j = {{"type", type}, {"sequence_number", seq_++}};
  for (auto& [k, v] : fields.items()) j[k] = std::move(v);
  return std::string("event: ") + type + "\ndata: " + dump(j) + "\n\n";
}

int64_t responses_builder::reasoning_tokens() const {
  // The tokens up to and including </think>; all of them when thinking was cut off.
  if (think_end_ < 0 || !saw_reasoning_) return 0;
  return thought_ids_;
}

void responses_builder::count_id(int32_t id) {
  if (!in_thought_) return;
  ++thought_ids_;
  if (id == think_end_) {
    in_thought_ = false;
    pending_logprobs_.clear();  // the thinking's: only the answer's tokens carry logprobs
  }
}

std::string responses_builder::begin() {
  if (begun_ || !stream_) return {};
  begun_ = true;
  // A background response is created queued (what its creator was answered), as OpenAI's.
  std::string out = sse("response.created", {{"response", response_json(background_ ? "queued" : "in_progress")}});
  out += sse("response.in_progress", {{"response", response_json("in_progress")}});
  return out;
}

std::string responses_builder::open(item::kind k) {
  std::string out;
  if (!items_.empty() && !items_.back().done) {
    if (items_.back().k == k) return out;
    out += close_open();
  }
  item it;
  it.k = k;
  const size_t index = items_.size();
  it.id = item_id(k == item::kind::reasoning ? "rs" : k == item::kind::message ? "msg" : "fc", index);
  items_.push_back(std::move(it));
  if (!stream_) return out;
  const auto& added = items_.back();
  out += sse("response.output_item.added", {{"output_index", index}, {"item", item_json(added)}});
  if (k == item::kind::reasoning)
    out += sse("response.content_part.added", {{"item_id", added.id}, {"output_index", index}, {"content_index", 0},
                                                {"part", {{"type", "reasoning_text"}, {"text", ""}}}});
  else if (k == item::kind::message)
    out += sse("response.content_part.added",
               {{"item_id", added.id}, {"output_index", index}, {"content_index", 0}, {"part", part_json(added, false)}});
  return out;
}

std::string responses_builder::close_open() {
  if (items_.empty() || items_.back().done) return {};
  auto& it = items_.back();
  it.done = true;
  if (!stream_) return {};
  const size_t index = items_.size() - 1;
  std::string out;
  const ojson where = {{"item_id", it.id}, {"output_index", index}};
  auto with = [&](ojson extra) {
    ojson j = where;
    for (auto& [k, v] : extra.items()) j[k] = std::move(v);
    return j;
  };
  if (it.k == item::kind::reasoning) {
    out += sse("response.reasoning_text.done", with({{"content_index", 0}, {"text", it.text}}));
    out += sse("response.content_part.done",
               with({{"content_index", 0}, {"part", {{"type", "reasoning_text"}, {"text", it.text}}}}));
  } else if (it.k == item::kind::message) {
    ojson lps = ojson::array();
    for (const auto& lp : it.logprobs) lps.push_back(logprob_json(lp));
    out += sse("response.output_text.done", with({{"content_index", 0}, {"text", it.text}, {"logprobs", lps}}));
    out += sse("response.content_part.done", with({{"content_index", 0}, {"part", part_json(it, false)}}));
  } else {
    out += sse("response.function_call_arguments.done", with({{"arguments", it.text}}));
  }
  out += sse("response.output_item.done", {{"output_index", index}, {"item", item_json(it)}});
  return out;
}

std::string responses_builder::on_token(const token_event& t) {
  if (t.index.value_or(0) != 0) return {};
  std::string out = begin();
  if (t.logprobs && !t.ids.empty()) pending_logprobs_.emplace_back(t.ids[0], *t.logprobs);
  for (int32_t id : t.ids) count_id(id);
  if (t.reasoning && !t.reasoning->empty()) {
    saw_reasoning_ = true;
    out += open(item::kind::reasoning);
    auto& it = items_.back();
    it.text += *t.reasoning;
    if (stream_)
      out += sse("response.reasoning_text.delta", {{"item_id", it.id}, {"output_index", items_.size() - 1},
                                                    {"content_index", 0}, {"delta", *t.reasoning}});
  }
  // With tools, text from "<tool_call>" on is held back; done turns it into calls (or, with
  // stream_tool_arguments, each call streams as it is written).
  auto [text, pieces] = calls_.push(t.text);
  if (!text.empty()) out += add_text(text);
  for (const auto& c : pieces) out += add_call_piece(c);
  // A streamed call whose arguments are whole ends now (an earlier one ended when the next began).
  if (calls_.streams_calls() && calls_.complete() == calls_.streamed() && !items_.empty() && !items_.back().done &&
      items_.back().k == item::kind::call)
    out += close_open();
  return out;
}

std::string responses_builder::add_call_piece(const tool_call_stream::call_piece& c) {
  std::string out;
  if (c.begins) {
    out += close_open();
    item it;
    it.k = item::kind::call;
    it.id = item_id("fc", items_.size());
    it.call_id = "call_" + it.id.substr(3);
    it.name = c.name;
    items_.push_back(std::move(it));
    out += sse("response.output_item.added", {{"output_index", items_.size() - 1}, {"item", item_json(items_.back())}});
  }
  auto& it = items_.back();
  it.text += c.arguments;
  if (!c.arguments.empty())
    out += sse("response.function_call_arguments.delta",
               {{"item_id", it.id}, {"output_index", items_.size() - 1}, {"delta", c.arguments}});
  return out;
}

std::string responses_builder::add_text(const std::string& text) {
  std::string out = open(item::kind::message);
  auto& it = items_.back();
  it.text += text;
  ojson lps = ojson::array();
  for (auto& lp : pending_logprobs_) {
    if (want_logprobs_) lps.push_back(logprob_json(lp));
    it.logprobs.push_back(std::move(lp));
  }
  pending_logprobs_.clear();
  if (stream_) {
    ojson fields = {{"item_id", it.id}, {"output_index", items_.size() - 1}, {"content_index", 0}, {"delta", text}};
    fields["logprobs"] = std::move(lps);
    out += sse("response.output_text.delta", std::move(fields));
  }
  return out;
}

std::string responses_builder::on_error(const wire_error& e) {
  complete_ = true;
  if (!begun_ && !background_) {
    status_ = http_status(e.code);
    return error_body(from_wire(e));
  }
  // Mid-stream (or a background response, whose creator was answered already): the response as
  // failed, streamed after OpenAI's error event.
  std::string out = begin();
  finished_ = true;
  ojson r = response_json("failed");
  r["error"] = {{"code", std::string(to_string(e.code))}, {"message", e.message}};
  if (on_final_ && background_) on_final_(r);
  if (!stream_) return dump(r);
  out += sse("error", {{"code", std::string(to_string(e.code))}, {"message", e.message}, {"param", nullptr}});
  return out + sse("response.failed", {{"response", std::move(r)}});
}

std::string responses_builder::on_done(done_event&& d) {
  if (d.index.value_or(0) != 0) return {};
  if (d.reason == finish_reason::error && d.error && !begun_) return on_error(*d.error);
  std::string out = begin();
  usage_ = d.usage;
  std::vector<tool_call> calls = std::move(d.tool_calls);
  const size_t streamed = calls_.streamed();  // calls already items, streamed
  held_ = calls_.take_held();  // what was held back as possibly calls
  if (!stream_ && d.has_output) {
    // The whole output rides on done: the same items a stream would have made (from scratch:
    // token events, which a whole request does not get, would only repeat it).
    items_.clear();
    pending_logprobs_.clear();
    in_thought_ = true;
    saw_reasoning_ = false;
    thought_ids_ = 0;
    for (size_t i = 0; i < d.ids.size(); ++i) {
      if (i < d.logprobs.size()) pending_logprobs_.emplace_back(d.ids[i], d.logprobs[i]);
      count_id(d.ids[i]);
    }
    if (d.reasoning && !d.reasoning->empty()) {
      saw_reasoning_ = true;
      open(item::kind::reasoning);
      items_.back().text = *d.reasoning;
    }
    held_ = d.text;
  }
  if (forced_ && d.reason != finish_reason::error) {
    // The output is the call's JSON: it replaces the text (unless it was cut short).
    if (auto forced = forced_tool_calls(*forced_, held_); !forced.empty()) {
      calls = std::move(forced);
      held_.clear();
    }
  }
  if (!stream_ && !calls.empty()) held_ = content_before_calls(held_);
  else if (!calls.empty() || streamed > 0) held_.clear();  // the block itself, now calls
  if (!held_.empty()) out += add_text(std::exchange(held_, {}));
  // A response always says something: an empty answer is an empty message.
  if (calls.empty() && streamed == 0 && items_.empty()) out += open(item::kind::message);
  if (!items_.empty() && !items_.back().done) {
    auto& last = items_.back();
    if (last.k == item::kind::call)  // a streamed call: cut when its arguments never closed
      last.cut = calls_.complete() < calls_.streamed();
    else if (calls.empty() && streamed == 0)
      last.cut = d.reason != finish_reason::stop;
  }
  out += close_open();
  for (size_t k = streamed; k < calls.size(); ++k) {
    auto& call = calls[k];
    item it;
    it.k = item::kind::call;
    it.id = item_id("fc", items_.size());
    it.call_id = "call_" + it.id.substr(3);
    it.name = std::move(call.name);
    it.text = std::move(call.arguments);
    items_.push_back(std::move(it));
    if (stream_) {
      // Added with empty arguments (the identity, call_id and name, set); they follow whole.
      const auto& c = items_.back();
      const size_t index = items_.size() - 1;
      out += sse("response.output_item.added", {{"output_index", index}, {"item", item_json(c)}});
      out += sse("response.function_call_arguments.delta", {{"item_id", c.id}, {"output_index", index}, {"delta", c.text}});
    }
    out += close_open();
  }
  finished_ = true;
  complete_ = true;
  const char* status = status_of(d.reason);
  ojson r = response_json(status);
  if (d.reason == finish_reason::length) r["incomplete_details"] = {{"reason", "max_output_tokens"}};
  if (d.reason == finish_reason::error && d.error)
    r["error"] = {{"code", std::string(to_string(d.error->code))}, {"message", d.error->message}};
  if (on_final_ && (d.reason != finish_reason::error || background_)) on_final_(r);
  if (!stream_) return dump(r);
  // As vLLM: the last event is response.completed whatever the status (an incomplete or cancelled
  // response too: OpenAI's SDK gives a stream's final response only from that event), except a
  // failure.
  const char* event = d.reason == finish_reason::error ? "response.failed" : "response.completed";
  if (d.reason == finish_reason::error && d.error)
    out += sse("error", {{"code", std::string(to_string(d.error->code))}, {"message", d.error->message}, {"param", nullptr}});
  return out + sse(event, {{"response", std::move(r)}});
}

namespace {
// `items`, then the output items of the response whose text is `text` as the client saw them: read
// back, so a token's broken UTF-8 is U+FFFD there too and every item is valid input again.
ojson with_output_as_sent(ojson items, const std::string& text) {
  ojson seen = ojson::parse(text);  // named: a range-for over a temporary's member would dangle
  for (auto& it : seen.at("output")) items.push_back(std::move(it));
  return items;
}
}  // namespace

std::string response_text(const ojson& response) { return dump(response); }

void keep_response(response_store& store, const std::string& id, const ojson& conversation, const ojson& response,
                   std::shared_ptr<const std::vector<std::string>> events, bool finished, const std::string* given) {
  std::string text = given ? *given : dump(response);
  ojson all = with_output_as_sent(conversation, text);
  if (events && store.put(id, all, text, conversation.size(), std::move(events), finished)) return;
  store.put(id, std::move(all), std::move(text), conversation.size(), nullptr, finished);
}

ojson listed_item(ojson it) {
  if (!it.contains("type")) it["type"] = "message";
  if (it["type"] == "message" && it.contains("content") && it["content"].is_string()) {
    const bool out_text = it.value("role", "") == "assistant";
    it["content"] = ojson::array({ojson{{"type", out_text ? "output_text" : "input_text"}, {"text", it["content"]}}});
  }
  return it;
}

list_page_answer list_page(ojson items, const std::string& owner, const std::optional<std::string>& order,
                           const std::optional<std::string>& limit, const std::optional<std::string>& after) {
  try {
    const bool asc = order.value_or("desc") == "asc";
    if (order && *order != "asc" && *order != "desc")
      refuse("invalid_value", "order", "parameter 'order' is '" + *order + "'; expected asc or desc");
    int64_t n = 20;
    if (limit) {
      size_t used = 0;
      try {
        n = std::stoll(*limit, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || used != limit->size() || n < 1 || n > 100)
        refuse("invalid_value", "limit", "parameter 'limit' is '" + *limit + "'; expected an integer from 1 to 100");
    }
    if (!asc) std::reverse(items.begin(), items.end());
    size_t start = 0;
    if (after) {
      auto at = std::find_if(items.begin(), items.end(), [&](const ojson& it) { return it["id"] == *after; });
      if (at == items.end()) refuse("invalid_value", "after", "parameter 'after' names no item of " + owner);
      start = static_cast<size_t>(at - items.begin()) + 1;
    }
    ojson data = ojson::array();
    for (size_t i = start; i < items.size() && static_cast<int64_t>(data.size()) < n; ++i) data.push_back(items[i]);
    const bool more = start + data.size() < items.size();
    ojson page = {{"object", "list"},
                  {"data", data},
                  {"first_id", data.empty() ? ojson(nullptr) : data.front()["id"]},
                  {"last_id", data.empty() ? ojson(nullptr) : data.back()["id"]},
                  {"has_more", more}};
    return {200, dump(page)};
  } catch (const refusal& r) {
    return {r.e.status, error_body(r.e)};
  }
}

input_items_page input_items(const response_store::entry& e, const std::string& response_id,
                             const std::optional<std::string>& order, const std::optional<std::string>& limit,
                             const std::optional<std::string>& after) {
  // Every input item with an id (one made for an item sent without), in input order.
  const std::string hex = response_id.substr(response_id.find('_') + 1);
  ojson items = ojson::array();
  for (size_t i = 0; i < e.num_input; ++i) {
    ojson it = listed_item((*e.items)[i]);
    if (!it.contains("id") || !it["id"].is_string()) it["id"] = "item_" + hex + "_" + std::to_string(i);
    items.push_back(std::move(it));
  }
  return list_page(std::move(items), "response '" + response_id + "''s input", order, limit, after);
}

void check_input_items(const ojson& items, std::string_view name) {
  want(items, items.is_array(), std::string(name), "an array of items");
  input_messages(items, nullptr, 0, "", name);
}

bool add_to_conversation(conversation_store& store, const std::string& conversation_id, const ojson& new_items,
                         const ojson& response, const std::string* text) {
  if (response.value("status", "") == "failed") return false;
  const ojson added = with_output_as_sent(new_items, text ? *text : dump(response));
  return store.update(conversation_id, [&](conversation& c) { c.append(added); }) == conversation_store::status::ok;
}

std::string responses_builder::feed(const event& e) {
  if (complete_) return {};
  if (const auto* t = std::get_if<token_event>(&e)) return on_token(*t);
  if (const auto* d = std::get_if<done_event>(&e)) return on_done(done_event(*d));
  if (const auto* err = std::get_if<wire_error>(&e)) return on_error(*err);
  return {};
}

}  // namespace troupe::wire::openai
