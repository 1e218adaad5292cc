#include "runtime/wire/openai.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "runtime/wire/json_msgpack.hpp"
#include "runtime/wire/openai_detail.hpp"
#include "runtime/wire/request_codec.hpp"

namespace troupe::wire::openai {

bool valid_request_id(std::string_view id) noexcept {
  if (id.empty() || id.size() > 256) return false;
  for (unsigned char c : id)
    if (c < 0x21 || c > 0x7e) return false;
  return true;
}

namespace detail {

void refuse(std::string code, std::string param, std::string message, int status) {
  throw refusal{{status, std::move(message), std::move(code), std::move(param)}};
}

std::string dump(const ojson& j) { return j.dump(-1, ' ', false, ojson::error_handler_t::replace); }

void only_keys(const ojson& o, const std::string& where, std::initializer_list<std::string_view> keys) {
  for (const auto& [k, v] : o.items())
    if (std::find(keys.begin(), keys.end(), k) == keys.end())
      refuse("unknown_field", where + "." + k, "unknown field '" + where + "." + k + "'");
}

const ojson& need(const ojson& o, const std::string& where, const char* key) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null())
    refuse("missing_field", where + "." + key, "field '" + where + "' needs '" + key + "'");
  return *it;
}

std::string need_string(const ojson& o, const std::string& where, const char* key) {
  const ojson& v = need(o, where, key);
  want(v, v.is_string(), where + "." + key, "a string");
  return v.get<std::string>();
}

ojson chat_function_tool(const ojson& t, const std::string& where, const char* schema_key, bool schema_required) {
  ojson f = {{"name", need_string(t, where, "name")}};
  if (auto d = t.find("description"); d != t.end() && !d->is_null()) f["description"] = *d;
  if (schema_required) f["parameters"] = need(t, where, schema_key);
  else if (auto p = t.find(schema_key); p != t.end() && !p->is_null()) f["parameters"] = *p;
  return {{"type", "function"}, {"function", std::move(f)}};
}

void want(const ojson& v, bool ok, const std::string& field, const char* expected) {
  if (!ok)
    refuse("wrong_type", field,
           "field '" + field + "' must be " + expected + ", not " + v.type_name());
}

// vLLM's `request_id` field, checked as the X-Request-Id header is.
std::string request_id_field(const ojson& v) {
  want(v, v.is_string(), "request_id", "a string");
  const auto& id = v.get_ref<const std::string&>();
  if (!valid_request_id(id))
    refuse("invalid_value", "request_id",
           "field 'request_id' must be 1..256 visible ASCII characters (no spaces), not " + v.dump());
  return id;
}

ojson parse_body(std::string_view body) {
  ojson b;
  try {
    b = ojson::parse(body);
  } catch (const nlohmann::json::exception& e) {
    refuse("malformed", "", std::string("the request body is not JSON: ") + e.what());
  }
  if (!b.is_object()) refuse("malformed", "", std::string("the request body must be a JSON object, not ") + b.type_name());
  return b;
}

bool names_adapter(const ojson& v, const served_models& models) {
  want(v, v.is_string(), "model", "a string");
  const auto name = v.get<std::string>();
  if (std::find(models.adapters.begin(), models.adapters.end(), name) != models.adapters.end()) return true;
  if (name != models.base && std::find(models.aliases.begin(), models.aliases.end(), name) == models.aliases.end())
    refuse("model_not_found", "model", "the model '" + name + "' does not exist; this server serves '" + models.base + "'" +
               (models.adapters.empty() ? std::string() : " and its LoRA adapters (GET /v1/models)"),
           404);
  return false;
}

void chat_template_kwargs(const ojson& v, ojson& w) {
  want(v, v.is_object(), "chat_template_kwargs", "an object");
  for (const auto& [k, value] : v.items()) {
    if (k == "enable_thinking") {
      w["enable_thinking"] = value;
    } else {
      if (is_reserved_template_variable(k))
        refuse("invalid_value", "chat_template_kwargs." + k,
               "chat_template_kwargs." + k + " is not a template switch: the request's own fields set it");
      w["chat_template_kwargs"][k] = value;
    }
  }
}

std::optional<request> decode_wire(const ojson& w, api_error& error) {
  std::string payload;
  wire::detail::string_sink sink{&payload};
  wire::detail::pack_json_text(sink, w.dump());
  auto d = decode_request(payload);
  if (!d.ok()) {
    error = from_wire(d.error);
    // The protocol's messages name the field ("field 'n' must be ..."): OpenAI's `param`.
    const std::string& m = d.error.message;
    if (const size_t at = m.find("field '"); at != std::string::npos)
      if (const size_t end = m.find('\'', at + 7); end != std::string::npos) error.param = m.substr(at + 7, end - at - 7);
    return std::nullopt;
  }
  return std::move(*d.req);
}

namespace {

// OpenAI's content: a string, or an array of {"type": "text", "text": ...} parts (joined).
ojson message_content(const ojson& c, const std::string& where) {
  if (!c.is_array()) return c;  // string or anything else: the decoder judges it
  std::string text;
  for (size_t i = 0; i < c.size(); ++i) {
    const auto& part = c[i];
    const std::string pw = where + "[" + std::to_string(i) + "]";
    want(part, part.is_object(), pw, "an object");
    auto t = part.find("type");
    if (t == part.end() || !t->is_string()) refuse("missing_field", pw + ".type", "field '" + pw + "' needs a string 'type'");
    if (*t != "text")
      refuse("unsupported", pw + ".type",
             "content parts of type '" + t->get<std::string>() + "' are not supported: Qwen3 reads text only", 400);
    for (const auto& [k, v] : part.items())
      if (k != "type" && k != "text") refuse("unknown_field", pw + "." + k, "unknown field '" + pw + "." + k + "'");
    auto x = part.find("text");
    if (x == part.end()) refuse("missing_field", pw + ".text", "field '" + pw + "' needs 'text'");
    want(*x, x->is_string(), pw + ".text", "a string");
    if (i > 0) text += '\n';  // vLLM joins a message's text parts so ("\n".join: chat_utils.py)
    text += x->get<std::string>();
  }
  return text;
}

}  // namespace

namespace {
constexpr std::string_view call_open = "<tool_call>";
}  // namespace

ojson bytes_json(const std::string& s) {
  ojson a = ojson::array();
  for (unsigned char c : s) a.push_back(c);
  return a;
}

std::string content_before_calls(const std::string& text) {
  auto s = text.substr(0, text.find(call_open));
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

ojson messages(const ojson& m) {
  want(m, m.is_array(), "messages", "an array");
  ojson out = ojson::array();
  for (size_t i = 0; i < m.size(); ++i) {
    const auto& msg = m[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!msg.is_object()) {
      out.push_back(msg);  // the decoder names the wrong type
      continue;
    }
    ojson t = ojson::object();
    for (const auto& [k, v] : msg.items()) {
      if (k == "name" || k == "tool_call_id") continue;  // Qwen3's template does not print them
      if (k == "content")
        t[k] = v.is_null() ? (msg.contains("tool_calls") ? v : ojson("")) : message_content(v, where + ".content");
      else if (k == "role" && v == "developer")
        t[k] = "system";  // OpenAI's newer name for the system turn
      else
        t[k] = v;  // role, reasoning_content, tool_calls; anything else the decoder names
    }
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace detail

using namespace detail;

namespace {

// vLLM's older guided_* fields, as structured_outputs keys.
const char* guided_key(const std::string& k) {
  if (k == "guided_json") return "json";
  if (k == "guided_regex") return "regex";
  if (k == "guided_choice") return "choice";
  if (k == "guided_grammar") return "grammar";
  return nullptr;
}

// vLLM's sampling fields whose default is what Troupe does, which clients written for vLLM send
// as they are (true when `k` is one and `v` its default; another value is refused naming it):
// Qwen3's tokenizer adds no special tokens (add_special_tokens either way), structured output has
// one backend (guided_decoding_backend, any name), and special tokens' text, when
// kept, is joined as the tokenizer decodes it (spaces_between_special_tokens).
bool vllm_default_only(const std::string& k, const ojson& v) {
  if (k == "add_special_tokens") {
    want(v, v.is_boolean(), k, "a boolean");  // Qwen3's tokenizer adds none either way
    return true;
  }
  if (k == "guided_decoding_backend") {
    want(v, v.is_string(), k, "a string");  // one grammar engine serves every backend's requests
    return true;
  }
  if (k == "spaces_between_special_tokens") {
    want(v, v.is_boolean(), k, "a boolean");
    if (!v.get<bool>()) refuse("unsupported", k, "spaces_between_special_tokens false is not served");
    return true;
  }
  return false;
}

bool passes_through(const std::string& k) {
  static constexpr std::string_view same[] = {
      "temperature", "top_p",  "n",           "seed",       "presence_penalty", "frequency_penalty",
      "logit_bias",  "top_k",  "min_p",       "repetition_penalty", "min_tokens", "ignore_eos",
      "allowed_token_ids", "bad_words", "response_format", "structured_outputs", "priority", "truncate_prompt_tokens",
      "include_stop_str_in_output", "skip_special_tokens", "cache_salt", "thinking_token_budget",
      "use_beam_search", "length_penalty"};
  return std::find(std::begin(same), std::end(same), k) != std::end(same);
}

}  // namespace

int http_status(error_code code) noexcept {
  switch (code) {
    case error_code::frame_too_large: return 413;
    case error_code::duplicate_id: return 409;
    case error_code::unknown_id: return 404;
    case error_code::too_many_requests: return 429;
    case error_code::shutting_down: return 503;
    case error_code::forbidden: return 403;
    case error_code::idle_timeout: return 408;
    case error_code::internal: return 500;
    default: return 400;
  }
}

api_error from_wire(const wire_error& e) { return {http_status(e.code), e.message, std::string(to_string(e.code)), ""}; }

std::string error_body(const api_error& e) {
  ojson err = {{"message", e.message},
               {"type", e.status >= 500 ? "server_error" : "invalid_request_error"},
               {"param", e.param.empty() ? ojson(nullptr) : ojson(e.param)},
               {"code", e.code}};
  return dump(ojson{{"error", err}});
}

namespace {

// The fields /v1/embeddings, /v1/rerank and /v1/score share: `model` (the base model; an adapter
// is refused, `what` naming the request), `priority`, and `user` as the fair-share tenant. True
// when `k` is one of them.
bool pooled_field(const std::string& k, const ojson& v, const served_models& models, const char* what, ojson& w,
                  parsed_request& out) {
  if (k == "model") {
    if (names_adapter(v, models))
      refuse("unsupported", k, std::string(what) + " with a LoRA adapter is not supported; name the base model '" +
                                   models.base + "'");
    out.model = models.base;  // an alias answers with the first name, as vLLM's
  } else if (k == "priority") {
    w[k] = v;
  } else if (k == "user") {
    w["tenant"] = v;
  } else if (k == "request_id") {
    out.request_id = request_id_field(v);
  } else {
    return false;
  }
  return true;
}

// The protocol's request `w` through the strict decoder: out.req, or out.error naming the field.
void decode_pooled(const ojson& w, parsed_request& out) {
  auto d = decode_wire(w, out.error);
  if (d) out.req = std::get<generate_request>(std::move(*d));
}

// POST /v1/embeddings: OpenAI's body as the protocol's embed request (docs/protocol.md).
void parse_embeddings(const ojson& b, const served_models& models, const std::string& id, parsed_request& out) {
  ojson w = {{"v", protocol_version}, {"type", "embed"}, {"id", id}};
  for (const auto& [k, v] : b.items()) {
    if (v.is_null() || pooled_field(k, v, models, "embeddings", w, out)) continue;
    if (k == "input" || k == "dimensions" || k == "normalize" || k == "truncate_prompt_tokens") {
      w[k] = v;
    } else if (k == "encoding_format") {
      want(v, v.is_string() && (v == "float" || v == "base64"), k, "\"float\" or \"base64\"");
      out.base64 = v == "base64";
    } else {
      refuse("unknown_field", k, "unknown field '" + k + "' for /v1/embeddings (docs/openai_api.md lists the fields served)");
    }
  }
  if (!b.contains("input")) refuse("missing_field", "input", "an embeddings request needs field 'input'");
  decode_pooled(w, out);
}

// POST /classify (vLLM's): a sequence classifier's label probabilities for each input, as the
// protocol's embed request with task "classify".
void parse_classify(const ojson& b, const served_models& models, const std::string& id, parsed_request& out) {
  ojson w = {{"v", protocol_version}, {"type", "embed"}, {"id", id}, {"task", "classify"}};
  for (const auto& [k, v] : b.items()) {
    if (v.is_null() || pooled_field(k, v, models, "classification", w, out)) continue;
    if (k == "input" || k == "truncate_prompt_tokens") {
      w[k] = v;
    } else if (k == "add_special_tokens") {  // Qwen3's tokenizer adds none either way
      want(v, v.is_boolean(), k, "a boolean");
    } else {
      refuse("unknown_field", k, "unknown field '" + k + "' for /classify (docs/openai_api.md lists the fields served)");
    }
  }
  if (!b.contains("input")) refuse("missing_field", "input", "a classify request needs field 'input'");
  decode_pooled(w, out);
}

// POST /v1/rerank (vLLM's, after Jina's and Cohere's): the protocol's rerank request.
void parse_rerank(const ojson& b, const served_models& models, const std::string& id, parsed_request& out) {
  ojson w = {{"v", protocol_version}, {"type", "rerank"}, {"id", id}};
  for (const auto& [k, v] : b.items()) {
    if (v.is_null() || pooled_field(k, v, models, "reranking", w, out)) continue;
    if (k == "query" || k == "documents" || k == "instruction") {
      w[k] = v;
    } else if (k == "top_n") {
      want(v, v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= static_cast<int64_t>(max_embed_inputs), k,
           "an integer from 0 (every document) to 128");
      out.top_n = v.get<int32_t>();
    } else if (k == "return_documents") {
      want(v, v.is_boolean(), k, "a boolean");
    } else {
      refuse("unknown_field", k, "unknown field '" + k + "' for /v1/rerank (docs/openai_api.md lists the fields served)");
    }
  }
  if (!b.contains("query")) refuse("missing_field", "query", "a rerank request needs field 'query'");
  if (!b.contains("documents")) refuse("missing_field", "documents", "a rerank request needs field 'documents'");
  decode_pooled(w, out);
}

// POST /v1/score (vLLM's): text_1 against each of text_2 (1:1 and 1:N) or text_1[i] against
// text_2[i] (N:N, pairwise), as the rerank request with one query or one query per document.
void parse_score(const ojson& b, const served_models& models, const std::string& id, parsed_request& out) {
  ojson w = {{"v", protocol_version}, {"type", "rerank"}, {"id", id}};
  for (const auto& [k, v] : b.items()) {
    if (v.is_null() || pooled_field(k, v, models, "scoring", w, out)) continue;
    if (k == "text_1") {
      w["queries"] = v.is_array() ? v : ojson::array({v});
    } else if (k == "text_2") {
      w["documents"] = v.is_array() ? v : ojson::array({v});
    } else if (k == "instruction") {
      w[k] = v;
    } else {
      refuse("unknown_field", k, "unknown field '" + k + "' for /v1/score (docs/openai_api.md lists the fields served)");
    }
  }
  if (!b.contains("text_1")) refuse("missing_field", "text_1", "a score request needs field 'text_1'");
  if (!b.contains("text_2")) refuse("missing_field", "text_2", "a score request needs field 'text_2'");
  // As vLLM: 1:1, 1:N or N:N; the wire request names `queries`, which the client did not write.
  auto& q = w["queries"];
  const auto& d = w["documents"];
  if (q.is_array() && q.size() == 1) {
    w["query"] = q[0];
    w.erase("queries");
  } else if (q.is_array() && d.is_array() && q.size() != d.size()) {
    refuse("invalid_value", "text_1", "text_1 has " + std::to_string(q.size()) + " texts and text_2 " +
                                          std::to_string(d.size()) + ": give one text_1, or as many as text_2 (pairs)");
  }
  decode_pooled(w, out);
  // The decoder names the rerank request's fields; the client wrote text_1 and text_2.
  for (auto [wire_name, name] : {std::pair{"'queries", "'text_1"}, {"'query'", "'text_1'"}, {"'documents", "'text_2"}})
    for (size_t at; (at = out.error.message.find(wire_name)) != std::string::npos;)
      out.error.message.replace(at, std::string_view(wire_name).size(), name);
}

}  // namespace

namespace detail {

void parse_generate(endpoint ep, const ojson& b, const served_models& models, const std::string& id, parsed_request& out) {
  const bool chat = ep == endpoint::chat;
  ojson w = {{"v", protocol_version}, {"type", "generate"}, {"id", id}, {"stream", false}};
  if (chat) w["separate_reasoning"] = true;
  ojson so = ojson::object();
  bool logprobs_on = false, drop_tools = false, thinking_off = false, chat_echo = false;
  std::string effort;  // reasoning_effort
  std::optional<ojson> forced_choice;  // tool_choice "required" or a named function
  bool parallel_calls = true;
  std::optional<ojson> top_logprobs;
  for (const auto& [k, v] : b.items()) {
    if (v.is_null()) continue;  // OpenAI's clients send null for "not set"
    if (k == "model") {
      const bool adapter = names_adapter(v, models);
      if (adapter) w["adapter"] = v;
      out.model = adapter ? v.get<std::string>() : models.base;  // an alias answers with the first name, as vLLM's
    } else if (k == "stream") {
      want(v, v.is_boolean(), k, "a boolean");
      w["stream"] = v;
    } else if (k == "stream_options") {
      want(v, v.is_object(), k, "an object");
      for (const auto& [sk, sv] : v.items()) {
        if (sk != "include_usage" && sk != "continuous_usage_stats")
          refuse("unknown_field", k + "." + sk, "unknown field 'stream_options." + sk + "'");
        want(sv, sv.is_boolean(), "stream_options." + sk, "a boolean");
        (sk == "include_usage" ? out.include_usage : out.continuous_usage) = sv.get<bool>();
      }
    } else if (passes_through(k)) {
      w[k] = v;
    } else if (k == "max_tokens" || k == "max_completion_tokens") {
      w["max_tokens"] = v;
    } else if (k == "stop") {
      w["stop"] = v.is_string() ? ojson::array({v}) : v;
    } else if (k == "stop_token_ids") {
      w["stop_ids"] = v;
    } else if (k == "request_id") {
      out.request_id = request_id_field(v);
    } else if (k == "user") {
      w["tenant"] = v;  // fair-share policies share by tenant (docs/plugins.md)
    } else if (chat && k == "safety_identifier") {
      want(v, v.is_string(), k, "a string");
      if (!b.contains("user") || b["user"].is_null()) w["tenant"] = v;  // OpenAI's successor of `user`
    } else if (chat && k == "reasoning_effort") {
      // Qwen3 thinks or does not: "none" turns thinking off; another effort is a thinking budget
      // where the server maps it to one (model.reasoning_effort_budgets), else changes nothing.
      want(v, v.is_string(), k, "a string");
      thinking_off = v == "none";
      effort = v.get<std::string>();
    } else if (chat && (k == "store" || k == "metadata" || k == "service_tier" || k == "prompt_cache_key" ||
                        k == "verbosity")) {
      // OpenAI's fields that change nothing here: nothing is stored, there is one tier, prefix
      // caching needs no key, and Qwen3 has no verbosity setting.
      want(v, k == "store" ? v.is_boolean() : k == "metadata" ? v.is_object() : v.is_string(), k,
           k == "store" ? "a boolean" : k == "metadata" ? "an object" : "a string");
    } else if (const char* g = guided_key(k)) {
      so[g] = v;
    } else if (chat && k == "messages") {
      w["messages"] = messages(v);
    } else if (chat && k == "tools") {
      w["tools"] = v;
    } else if (chat && k == "tool_choice") {
      if (v == "none")
        drop_tools = true;
      else if (v != "auto")
        forced_choice = v;  // judged once the tools are known
    } else if (chat && k == "parallel_tool_calls") {
      // Qwen3 may call several tools either way; a forced "required" call makes one when false.
      want(v, v.is_boolean(), k, "a boolean");
      parallel_calls = v.get<bool>();
    } else if (chat && k == "logprobs") {
      want(v, v.is_boolean(), k, "a boolean");
      logprobs_on = v.get<bool>();
    } else if (chat && k == "top_logprobs") {
      top_logprobs = v;
    } else if (chat && k == "chat_template_kwargs") {
      chat_template_kwargs(v, w);
    } else if (chat && k == "chat_template") {  // vLLM's; the server decides whether it trusts it
      w[k] = v;
    } else if (chat && (k == "add_generation_prompt" || k == "continue_final_message")) {
      w[k] = v;  // vLLM's: the model continues the final message (assistant prefill)
    } else if (chat && k == "include_reasoning") {
      want(v, v.is_boolean(), k, "a boolean");
      out.include_reasoning = v.get<bool>();
    } else if (!chat && k == "prompt") {
      if (v.is_string()) {
        w["prompt"] = v;
      } else if (v.is_array() && !v.empty() && v[0].is_number()) {
        w["prompt_ids"] = v;
      } else if (v.is_array() && v.size() == 1 && (v[0].is_string() || v[0].is_array())) {
        w[v[0].is_string() ? "prompt" : "prompt_ids"] = v[0];
      } else if (v.is_array() && v.size() > 1 && (v[0].is_string() || v[0].is_array())) {
        w["prompts"] = v;  // a batch: choice p * n + j is completion j of prompt p (as vLLM)
      } else {
        refuse("wrong_type", k, "field 'prompt' must be a string, an array of token ids, or an array of those");
      }
    } else if (!chat && k == "logprobs") {
      w["logprobs"] = v;
    } else if (k == "return_tokens_as_token_ids") {  // vLLM's
      want(v, v.is_boolean(), k, "a boolean");
      out.tokens_as_ids = v.get<bool>();
    } else if (k == "return_token_ids") {  // vLLM's
      want(v, v.is_boolean(), k, "a boolean");
      out.return_token_ids = v.get<bool>();
      if (out.return_token_ids) w["return_prompt_ids"] = true;
    } else if (k == "prompt_logprobs") {  // vLLM's
      want(v, v.is_number_integer(), k, "an integer");
      if (v == -1)
        refuse("unsupported", k, "prompt_logprobs -1 (every token of the vocabulary at each position) is not served: ask "
                                 "for 0..20 of the most likely tokens");
      w[k] = v;  // the protocol checks its range
      out.prompt_logprobs = true;
    } else if (chat && k == "echo") {  // vLLM's: the assistant's prefill comes back ahead of the answer
      want(v, v.is_boolean(), k, "a boolean");
      chat_echo = v.get<bool>();
    } else if (!chat && k == "echo") {
      want(v, v.is_boolean(), k, "a boolean");
      out.echo = v.get<bool>();
    } else if (!chat && k == "suffix") {
      want(v, v.is_string(), k, "a string");
      if (!v.get<std::string>().empty()) refuse("unsupported", k, "suffix (fill-in-the-middle) is not supported");
    } else if (!chat && k == "best_of") {
      const auto n = b.contains("n") && b["n"].is_number_integer() ? b["n"] : ojson(1);
      if (v != n) refuse("unsupported", k, "best_of other than n is not supported");
    } else if (vllm_default_only(k, v)) {
      // vLLM's fields that clients written for it send with their default values: accepted.
    } else {
      refuse("unknown_field", k,
             "unknown field '" + k + "' for " + (chat ? "/v1/chat/completions" : "/v1/completions") +
                 " (docs/openai_api.md lists the fields served)");
    }
  }
  if (chat && !b.contains("messages")) refuse("missing_field", "messages", "a chat completion needs field 'messages'");
  if (!chat && !b.contains("prompt")) refuse("missing_field", "prompt", "a completion needs field 'prompt'");
  if (drop_tools) w.erase("tools");
  if (thinking_off && !w.contains("enable_thinking")) w["enable_thinking"] = false;
  if (forced_choice) {
    // The call's JSON is the output: structured output's schema, which a format of the
    // request's own would contradict.
    ojson schema;
    out.forced_tools =
        parse_forced_tool_choice(*forced_choice, w.contains("tools") ? w["tools"] : ojson(), parallel_calls, schema);
    if (w.contains("response_format") || w.contains("structured_outputs") || !so.empty())
      refuse("invalid_value", "tool_choice", "a forced tool call fixes the output's format: give no response_format, "
                                             "structured_outputs or guided_* beside it");
    so["json"] = schema;
  }
  // OpenAI's defaults, as vLLM keeps them: a chat answer runs to a stop or to the end of the
  // context (the scheduler ends it at max_model_len), a legacy completion stops after 16 tokens.
  if (!w.contains("max_tokens")) {
    if (!chat)
      w["max_tokens"] = 16;
    else if (models.max_model_len > 0)
      w["max_tokens"] = models.max_model_len;
  }
  if (out.echo) {
    if (w["stream"] == true) refuse("unsupported", "echo", "echo is supported without stream only");
    if (w.contains("truncate_prompt_tokens"))
      refuse("unsupported", "echo", "echo with truncate_prompt_tokens is not supported (the echo is the prompt as sent)");
    if (w.contains("logprobs")) {
      if (out.prompt_logprobs)
        refuse("unsupported", "prompt_logprobs",
               "give echo with logprobs (OpenAI's prompt logprobs) or prompt_logprobs (vLLM's), not both");
      w["prompt_logprobs"] = w["logprobs"];
    }
    // max_tokens 0 scores the prompt alone (vLLM's form): one token is generated and left out.
    if (w.contains("max_tokens") && w["max_tokens"] == 0) {
      w["max_tokens"] = 1;
      out.prompt_only = true;
    }
  }
  if (out.prompt_logprobs && w.contains("stream") && w["stream"] == true)  // as vLLM: they come whole, on the last event
    refuse("unsupported", "prompt_logprobs", "prompt_logprobs are not available when stream is true");
  if (top_logprobs && !logprobs_on) refuse("invalid_value", "top_logprobs", "top_logprobs needs logprobs: true");
  if (logprobs_on) w["logprobs"] = top_logprobs ? *top_logprobs : ojson(0);
  if (!w.contains("thinking_token_budget"))  // the request's own budget wins
    for (const auto& [name, budget] : models.effort_budgets)
      if (name == effort) w["thinking_token_budget"] = budget;
  if (!so.empty()) {
    if (w.contains("structured_outputs")) refuse("invalid_value", "structured_outputs", "give structured_outputs or guided_*, not both");
    w["structured_outputs"] = so;
  }
  auto d = decode_wire(w, out.error);
  if (!d) return;
  out.req = std::get<generate_request>(std::move(*d));
  if (!chat) out.include_reasoning = false;
  // vLLM's chat echo: the final message comes back ahead of the answer when it is the assistant's.
  if (chat_echo && !out.req->messages.empty() && out.req->messages.back().role == "assistant")
    out.chat_echo = out.req->messages.back().content;
}

}  // namespace detail

parsed_request parse_request(endpoint ep, std::string_view body, const served_models& models, const std::string& id) {
  parsed_request out;
  out.model = models.base;
  try {
    const ojson b = parse_body(body);
    if (ep == endpoint::embeddings || ep == endpoint::classify) {
      (ep == endpoint::embeddings ? parse_embeddings : parse_classify)(b, models, id, out);
      return out;
    }
    if (ep == endpoint::rerank || ep == endpoint::score) {
      (ep == endpoint::rerank ? parse_rerank : parse_score)(b, models, id, out);
      return out;
    }
    parse_generate(ep, b, models, id, out);
  } catch (const refusal& r) {
    out.error = r.e;
  } catch (const std::exception& e) {  // pack_json_text on numbers msgpack cannot hold, ...
    out.error = {400, std::string("the request body cannot be read: ") + e.what(), "malformed", ""};
  }
  return out;
}

std::optional<std::string_view> invocation_path(std::string_view body) {
  const ojson b = ojson::parse(body, nullptr, false);
  if (!b.is_object()) return std::nullopt;
  auto has = [&](const char* k) { return b.contains(k) && !b[k].is_null(); };
  if (has("messages")) return "/v1/chat/completions";
  if (has("prompt")) return "/v1/completions";
  if (has("input")) return "/v1/embeddings";
  if (has("query")) return "/v1/rerank";
  if (has("text_1") || has("queries")) return "/v1/score";
  return std::nullopt;
}

namespace {

// Every model object the API serves (OpenAI's "model": id, object, created, owned_by; vLLM's root,
// parent and max_model_len): the base model, each alias, each adapter.
ojson model_objects(const served_models& models, int64_t created) {
  ojson data = ojson::array();
  auto entry = [&](const std::string& name, const std::string& parent) {
    data.push_back({{"id", name},
                    {"object", "model"},
                    {"created", created},
                    {"owned_by", "troupe"},
                    {"root", parent.empty() ? name : parent},
                    {"parent", parent.empty() ? ojson(nullptr) : ojson(parent)},
                    {"max_model_len", models.max_model_len}});
  };
  entry(models.base, "");
  for (const auto& a : models.aliases) entry(a, "");  // as vLLM lists each served name
  for (const auto& a : models.adapters) entry(a, models.base);
  return data;
}

}  // namespace

std::string models_body(const served_models& models, int64_t created) {
  return dump(ojson{{"object", "list"}, {"data", model_objects(models, created)}});
}

std::optional<std::string> model_body(const served_models& models, std::string_view name, int64_t created) {
  for (auto& m : model_objects(models, created))
    if (m["id"] == name) return dump(m);
  return std::nullopt;
}

// ---- responses -----------------------------------------------------------------------------

namespace {

const char* finish_name(finish_reason r, bool tool_calls) {
  switch (r) {
    case finish_reason::stop: return tool_calls ? "tool_calls" : "stop";
    case finish_reason::length: return "length";
    case finish_reason::cancelled:
    case finish_reason::deadline: return "abort";  // vLLM's name for a request ended early
    case finish_reason::error: return "error";
  }
  return "stop";
}

ojson usage_json(const usage_info& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_prompt_tokens}}}};
}

}  // namespace

response_builder::response_builder(endpoint ep, const parsed_request& p, int64_t created, token_bytes_fn token_bytes)
    : ep_(ep),
      id_(p.req->id),
      model_(p.model),
      created_(created),
      stream_(p.req->stream),
      include_usage_(p.include_usage),
      continuous_usage_(p.include_usage && p.continuous_usage),
      include_reasoning_(p.include_reasoning),
      has_tools_(!p.req->tools_json.empty()),
      want_logprobs_(p.req->logprobs.has_value()),
      echo_(p.echo),
      prompt_only_(p.prompt_only),
      base64_(p.base64),
      prompt_logprobs_(p.prompt_logprobs),
      return_token_ids_(p.return_token_ids),
      chat_echo_(p.chat_echo),
      n_(p.req->sequences()),
      per_prompt_(p.req->n),
      prompt_counted_(static_cast<size_t>(p.req->sequences() / p.req->n)),
      token_bytes_(p.tokens_as_ids ? [](int32_t id) { return "token_id:" + std::to_string(id); } : std::move(token_bytes)),
      choices_(static_cast<size_t>(p.req->sequences())),
      remaining_(p.req->sequences()),
      documents_(p.req->rerank ? p.req->rerank->documents : std::vector<std::string>{}),
      top_n_(p.top_n),
      forced_(p.forced_tools) {
  // A forced call's output is all call: streamed, it is held back whole, as a <tool_call> block is.
  if (stream_)
    for (auto& ch : choices_) ch.calls = call_holder(call_holder::for_reply(has_tools_, forced_.has_value(), p.stream_tool_arguments));
}

void response_builder::set_echo_prompt(size_t p, std::string text, std::vector<int32_t> ids) {
  if (echo_text_.size() <= p) {
    echo_text_.resize(p + 1);
    echo_ids_.resize(p + 1);
  }
  echo_text_[p] = std::move(text);
  echo_ids_[p] = std::move(ids);
}

ojson response_builder::completion_logprobs(const std::vector<int32_t>& ids,
                                            const std::vector<const logprob_info*>& lps) const {
  ojson tokens = ojson::array(), token_lps = ojson::array(), tops = ojson::array(), offsets = ojson::array();
  size_t text_offset = 0;
  for (size_t i = 0; i < std::min(ids.size(), lps.size()); ++i) {
    auto tok = token_bytes_(ids[i]);
    tokens.push_back(tok);
    if (lps[i]) {
      token_lps.push_back(lps[i]->logprob);
      ojson top = ojson::object();
      for (const auto& [id, lp] : lps[i]->top) top[token_bytes_(id)] = lp;
      tops.push_back(top);
    } else {
      token_lps.push_back(nullptr);
      tops.push_back(nullptr);
    }
    offsets.push_back(text_offset);
    text_offset += tok.size();
  }
  return {{"tokens", tokens}, {"token_logprobs", token_lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

ojson response_builder::prompt_logprobs_json(const std::optional<std::vector<logprob_info>>& pl) const {
  ojson out = ojson::array({nullptr});
  if (!pl) return out;
  for (const auto& l : *pl) {
    ojson at = ojson::object();
    auto entry = [&](int32_t id, double logprob, int32_t rank) {
      const std::string key = std::to_string(id);
      if (!at.contains(key)) at[key] = {{"logprob", logprob}, {"rank", rank}, {"decoded_token", token_bytes_(id)}};
    };
    if (l.id) entry(*l.id, l.logprob, l.rank.value_or(0));
    for (size_t k = 0; k < l.top.size(); ++k) entry(l.top[k].first, l.top[k].second, static_cast<int32_t>(k + 1));
    out.push_back(std::move(at));
  }
  return out;
}

ojson response_builder::logprobs_json(const std::vector<int32_t>& ids, const std::vector<logprob_info>& lps) const {
  const size_t k = std::min(ids.size(), lps.size());
  if (ep_ == endpoint::chat) {
    ojson content = ojson::array();
    for (size_t i = 0; i < k; ++i) {
      auto tok = token_bytes_(ids[i]);
      ojson top = ojson::array();
      for (const auto& [id, lp] : lps[i].top) {
        auto t = token_bytes_(id);
        top.push_back({{"token", t}, {"logprob", lp}, {"bytes", bytes_json(t)}});
      }
      content.push_back({{"token", tok}, {"logprob", lps[i].logprob}, {"bytes", bytes_json(tok)}, {"top_logprobs", top}});
    }
    return {{"content", content}};
  }
  std::vector<const logprob_info*> each;
  for (size_t i = 0; i < k; ++i) each.push_back(&lps[i]);
  return completion_logprobs(ids, each);
}

std::string response_builder::call_id(size_t choice, size_t k) const {
  return "call_" + id_ + "_" + std::to_string(choice) + "_" + std::to_string(k);
}

ojson response_builder::tool_calls_json(const std::vector<tool_call>& calls, size_t index, bool streamed,
                                        size_t first) const {
  ojson tc = ojson::array();
  for (size_t k = 0; k < calls.size(); ++k) {
    ojson call = ojson::object();
    if (streamed) call["index"] = first + k;
    call["id"] = call_id(index, first + k);
    call["type"] = "function";
    call["function"] = {{"name", calls[k].name}, {"arguments", calls[k].arguments}};
    tc.push_back(std::move(call));
  }
  return tc;
}

ojson response_builder::head(const char* object) const {
  return {{"id", id_}, {"object", object}, {"created", created_}, {"model", model_}};
}

std::string response_builder::chunk(int32_t index, ojson delta, ojson logprobs, const char* finish_reason,
                                    const token_event* ids) {
  const bool chat = ep_ == endpoint::chat;
  ojson c = {{"index", index}};
  c[chat ? "delta" : "text"] = std::move(delta);
  c["logprobs"] = std::move(logprobs);
  c["finish_reason"] = finish_reason ? ojson(finish_reason) : ojson(nullptr);
  const auto* prompt_ids = ids && ids->prompt_ids ? &*ids->prompt_ids : nullptr;
  if (return_token_ids_) {  // vLLM's: the prompt's ids once, on the choice's first chunk; each chunk its own
    if (prompt_ids && !chat) c["prompt_token_ids"] = *prompt_ids;
    c["token_ids"] = ids ? ojson(ids->ids) : ojson::array();
  }
  ojson j = head(chat ? "chat.completion.chunk" : "text_completion");
  if (return_token_ids_ && prompt_ids && chat) j["prompt_token_ids"] = *prompt_ids;
  j["choices"] = ojson::array({std::move(c)});
  if (continuous_usage_) {
    const auto& ch = choices_[static_cast<size_t>(index)];
    j["usage"] = {{"prompt_tokens", ch.prompt_tokens},
                  {"completion_tokens", ch.tokens},
                  {"total_tokens", ch.prompt_tokens + ch.tokens}};
  } else if (include_usage_) {
    j["usage"] = nullptr;
  }
  started_ = true;
  return "data: " + dump(j) + "\n\n";
}

ojson response_builder::delta_for(choice& ch) const {
  ojson delta = ojson::object();
  if (!ch.role_sent) {
    delta["role"] = "assistant";
    if (!chat_echo_.empty()) delta["content"] = chat_echo_;
  }
  ch.role_sent = true;
  return delta;
}

void response_builder::add_content(ojson& delta, const std::string& text) {
  delta["content"] = (delta.contains("content") ? delta["content"].get<std::string>() : std::string()) + text;
}

std::string response_builder::call_chunk(int32_t index, choice& ch, const tool_call_stream::call_piece& c) {
  ojson delta = delta_for(ch);
  ojson call = {{"index", c.index}};
  if (c.begins) {
    call["id"] = call_id(static_cast<size_t>(index), c.index);
    call["type"] = "function";
    call["function"] = {{"name", c.name}, {"arguments", c.arguments}};
  } else {
    call["function"] = {{"arguments", c.arguments}};
  }
  ojson calls = ojson::array();
  calls.push_back(std::move(call));
  delta["tool_calls"] = std::move(calls);
  return chunk(index, std::move(delta), nullptr, nullptr);
}

std::string response_builder::on_token(const token_event& t) {
  const auto i = t.index.value_or(0);
  if (i < 0 || i >= n_) return {};
  auto& ch = choices_[static_cast<size_t>(i)];
  std::vector<logprob_info> lps;
  if (t.logprobs) lps.push_back(*t.logprobs);
  if (!stream_) {
    ch.text += t.text;
    if (t.reasoning) ch.reasoning += *t.reasoning;
    return {};
  }
  if (t.prompt_tokens) ch.prompt_tokens = *t.prompt_tokens;
  ch.tokens += static_cast<int64_t>(t.ids.size());
  // Streaming with tools: text from "<tool_call>" on is held back; done turns it into tool_calls
  // (or, with stream_tool_arguments, each call streams as it is written).
  auto [text, pieces] = ch.calls.push(t.text);
  const std::string reasoning = include_reasoning_ && t.reasoning ? *t.reasoning : std::string();
  ojson lp = want_logprobs_ && !lps.empty()
                 ? logprobs_json({t.ids.begin(), t.ids.begin() + std::min<size_t>(1, t.ids.size())}, lps)
                 : ojson(nullptr);
  // return_token_ids: this token event's ids ride on its first chunk, which then always goes out.
  const bool ids_out = return_token_ids_ && (!t.ids.empty() || t.prompt_ids);
  const token_event* ids = ids_out ? &t : nullptr;
  if (ep_ == endpoint::completion) {
    if (text.empty() && lp.is_null() && !ids_out) return {};
    return chunk(i, text, std::move(lp), nullptr, ids);
  }
  std::string out;
  // The text first (it came before any call in this token's text), then the calls' pieces; a
  // first chunk that would carry only the role leaves it to the first call piece.
  if (!(text.empty() && reasoning.empty() && lp.is_null() && !ids_out && (ch.role_sent || !pieces.empty()))) {
    ojson delta = delta_for(ch);
    if (!reasoning.empty()) delta["reasoning_content"] = reasoning;
    if (!text.empty() || reasoning.empty()) add_content(delta, text);
    out = chunk(i, std::move(delta), std::move(lp), nullptr, ids);
  }
  for (const auto& c : pieces) out += call_chunk(i, ch, c);
  return out;
}

std::string response_builder::on_error(const wire_error& e) {
  complete_ = true;
  if (!started_) {
    status_ = http_status(e.code);
    return error_body(from_wire(e));
  }
  // Mid-stream: one event with the error (as vLLM sends it), then the end.
  return "data: " + error_body(from_wire(e)) + "\n\ndata: [DONE]\n\n";
}

std::string response_builder::on_done(done_event&& d) {
  const auto i = d.index.value_or(0);
  if (i < 0 || i >= n_ || choices_[static_cast<size_t>(i)].done) return {};
  auto& ch = choices_[static_cast<size_t>(i)];
  ch.done = true;
  if (d.reason == finish_reason::error && d.error && !started_) return on_error(*d.error);
  // Pooled endpoints: every input (or document) has a prompt of its own and one result. One that
  // ended without it (cancelled as the server shut down) fails the response, which never carries
  // an empty result; the body goes out when the last has come.
  auto pooled = [&](bool has, const char* item, const char* result, auto&& take) -> std::string {
    if (!has)
      return on_error({error_code::internal,
                       std::string(item) + " " + std::to_string(i) + " ended without its " + result + " (" +
                           std::string(to_string(d.reason)) + ")",
                       {}});
    usage_.prompt_tokens += d.usage.prompt_tokens;
    take();
    if (--remaining_ > 0) return {};
    complete_ = true;
    switch (ep_) {
      case endpoint::embeddings: return embeddings_body();
      case endpoint::classify: return classify_body();
      case endpoint::rerank: return rerank_body();
      default: return score_body();
    }
  };
  if (ep_ == endpoint::embeddings)
    return pooled(d.embedding.has_value(), "input", "embedding", [&] { ch.embedding = std::move(*d.embedding); });
  if (ep_ == endpoint::classify)
    return pooled(d.probs && d.label, "input", "label probabilities", [&] {
      ch.embedding = std::move(*d.probs);
      ch.label = std::move(*d.label);
    });
  if (ep_ == endpoint::rerank || ep_ == endpoint::score)
    return pooled(d.score.has_value(), "document", "score", [&] { ch.score = *d.score; });
  if (const auto prompt = static_cast<size_t>(i / per_prompt_); !prompt_counted_[prompt]) {
    prompt_counted_[prompt] = true;
    usage_.prompt_tokens += d.usage.prompt_tokens;
    usage_.cached_prompt_tokens += d.usage.cached_prompt_tokens;
  }
  if (!prompt_only_) usage_.completion_tokens += d.usage.completion_tokens;
  --remaining_;
  std::string held = ch.calls.take_held();  // streaming: what may be calls, not sent yet
  if (forced_ && d.reason != finish_reason::error) {
    // The output is the calls' JSON: they replace the text (unless it was cut short).
    std::string& text = stream_ ? held : (d.has_output ? d.text : ch.text);
    if (auto forced = forced_tool_calls(*forced_, text); !forced.empty()) {
      d.tool_calls = std::move(forced);
      text.clear();
      ch.text.clear();
    }
  }
  std::string out;
  const size_t streamed_calls = ch.calls.streamed();  // already sent piece by piece
  const bool calls = !d.tool_calls.empty() || streamed_calls > 0;
  if (!stream_) {
    if (d.has_output) {
      ch.text = d.text;
      if (d.reasoning) ch.reasoning = *d.reasoning;
      ch.ids = d.ids;
      ch.logprobs = d.logprobs;
    }
    ch.last = std::move(d);
    if (remaining_ == 0) {
      complete_ = true;
      return final_body();
    }
    return {};
  }
  const char* reason = finish_name(d.reason, calls && !forced_);  // a forced call ends as "stop" (OpenAI, vLLM)
  ch.prompt_tokens = d.usage.prompt_tokens;  // the last chunk's usage: done's
  ch.tokens = d.usage.completion_tokens;
  if (ep_ == endpoint::completion) {
    out += chunk(i, "", nullptr, reason);
  } else {
    ojson delta = delta_for(ch);
    if (d.tool_calls.size() > streamed_calls) {  // the calls not streamed, whole
      const std::vector<tool_call> rest(d.tool_calls.begin() + static_cast<std::ptrdiff_t>(streamed_calls),
                                        d.tool_calls.end());
      delta["tool_calls"] = tool_calls_json(rest, static_cast<size_t>(i), true, streamed_calls);
    } else if (!calls && !held.empty()) {
      add_content(delta, held);  // held back as a possible tool call, and it was none
    }
    out += chunk(i, std::move(delta), nullptr, reason);
  }
  if (d.reason == finish_reason::error && d.error) out += "data: " + error_body(from_wire(*d.error)) + "\n\n";
  if (remaining_ == 0) out += finish_stream();
  return out;
}

std::string response_builder::finish_stream() {
  std::string out;
  if (include_usage_) {
    ojson j = head(ep_ == endpoint::chat ? "chat.completion.chunk" : "text_completion");
    j["choices"] = ojson::array();
    j["usage"] = usage_json(usage_);
    out += "data: " + dump(j) + "\n\n";
  }
  out += "data: [DONE]\n\n";
  complete_ = true;
  return out;
}

namespace {
// Choice i's prompt's echo, from a list by prompt (i / per_prompt); empty where none was set.
template <class T>
T echo_of_prompt(const std::vector<T>& by_prompt, size_t prompt) {
  return prompt < by_prompt.size() ? by_prompt[prompt] : T{};
}
}  // namespace

std::string response_builder::final_body() {
  const auto echo_of = [&](const auto& by_prompt, size_t i) {
    return echo_of_prompt(by_prompt, i / static_cast<size_t>(per_prompt_));
  };
  const bool chat = ep_ == endpoint::chat;
  ojson cs = ojson::array();
  for (size_t i = 0; i < choices_.size(); ++i) {
    const auto& ch = choices_[i];
    const bool calls = !ch.last.tool_calls.empty();
    ojson c = {{"index", i}};
    if (chat) {
      ojson m = {{"role", "assistant"}};
      if (calls) {
        auto content = chat_echo_ + content_before_calls(ch.text);
        m["content"] = content.empty() ? ojson(nullptr) : ojson(content);
      } else {
        m["content"] = chat_echo_ + ch.text;
      }
      if (include_reasoning_ && !ch.reasoning.empty()) m["reasoning_content"] = ch.reasoning;
      if (calls) m["tool_calls"] = tool_calls_json(ch.last.tool_calls, i, false);
      c["message"] = m;
    } else {
      c["text"] = (echo_ ? echo_of(echo_text_, i) : "") + (prompt_only_ ? "" : ch.text);
    }
    if (!want_logprobs_) {
      c["logprobs"] = nullptr;
    } else if (!echo_) {
      c["logprobs"] = logprobs_json(ch.ids, ch.logprobs);
    } else {
      // The prompt's tokens first: the first has no logprob (nothing predicts it), each other
      // one the logprob the model gave it; then the completion's, unless it is left out.
      // The prompt's logprobs came with its first completion.
      std::vector<int32_t> ids = echo_of(echo_ids_, i);
      std::vector<const logprob_info*> lps;
      const auto& pl = choices_[i - i % static_cast<size_t>(per_prompt_)].last.prompt_logprobs;
      for (size_t t = 0; t < ids.size(); ++t)
        lps.push_back(t > 0 && pl && t - 1 < pl->size() ? &(*pl)[t - 1] : nullptr);
      if (!prompt_only_)
        for (size_t t = 0; t < ch.ids.size() && t < ch.logprobs.size(); ++t) {
          ids.push_back(ch.ids[t]);
          lps.push_back(&ch.logprobs[t]);
        }
      c["logprobs"] = completion_logprobs(ids, lps);
    }
    c["finish_reason"] = finish_name(ch.last.reason, calls && !forced_);
    if (return_token_ids_) {  // vLLM's: a completion's choice its prompt's ids, every choice its own
      if (!chat) c["prompt_token_ids"] = ch.last.prompt_ids ? ojson(*ch.last.prompt_ids) : ojson(nullptr);
      c["token_ids"] = prompt_only_ ? ojson::array() : ojson(ch.ids);
    }
    // vLLM's: a completion's choice carries its prompt's (they came with its first completion).
    if (prompt_logprobs_ && !chat)
      c["prompt_logprobs"] = prompt_logprobs_json(choices_[i - i % static_cast<size_t>(per_prompt_)].last.prompt_logprobs);
    cs.push_back(c);
  }
  ojson j = head(chat ? "chat.completion" : "text_completion");
  j["choices"] = std::move(cs);
  j["usage"] = usage_json(usage_);
  if (prompt_logprobs_ && chat) j["prompt_logprobs"] = prompt_logprobs_json(choices_.front().last.prompt_logprobs);
  if (return_token_ids_ && chat)
    j["prompt_token_ids"] = choices_.front().last.prompt_ids ? ojson(*choices_.front().last.prompt_ids) : ojson(nullptr);
  started_ = true;
  return dump(j);
}

namespace {

// RFC 4648 base64 of the bytes (OpenAI's encoding_format "base64": the float32 values' bytes,
// little-endian, which this host's are).
std::string base64_of(const void* data, size_t n) {
  static constexpr char table[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const auto* p = static_cast<const unsigned char*>(data);
  std::string out;
  out.reserve((n + 2) / 3 * 4);
  for (size_t i = 0; i < n; i += 3) {
    const uint32_t v = (uint32_t{p[i]} << 16) | (i + 1 < n ? uint32_t{p[i + 1]} << 8 : 0u) | (i + 2 < n ? p[i + 2] : 0u);
    out += table[(v >> 18) & 63];
    out += table[(v >> 12) & 63];
    out += i + 1 < n ? table[(v >> 6) & 63] : '=';
    out += i + 2 < n ? table[v & 63] : '=';
  }
  return out;
}

}  // namespace

std::string response_builder::embeddings_body() {
  ojson data = ojson::array();
  for (size_t i = 0; i < choices_.size(); ++i) {
    const auto& e = choices_[i].embedding;
    data.push_back({{"object", "embedding"},
                    {"index", i},
                    {"embedding", base64_ ? ojson(base64_of(e.data(), e.size() * sizeof(float))) : ojson(e)}});
  }
  ojson j = head("list");
  j["data"] = std::move(data);
  j["usage"] = {{"prompt_tokens", usage_.prompt_tokens}, {"total_tokens", usage_.prompt_tokens}};
  started_ = true;
  return dump(j);
}

std::string response_builder::rerank_body() {
  std::vector<size_t> order(choices_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  // Best first; equal scores keep the documents' order.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return choices_[a].score > choices_[b].score; });
  if (top_n_ > 0 && order.size() > static_cast<size_t>(top_n_)) order.resize(static_cast<size_t>(top_n_));
  ojson results = ojson::array();
  for (size_t i : order)
    results.push_back({{"index", i},
                       {"document", {{"text", i < documents_.size() ? documents_[i] : std::string()}}},
                       {"relevance_score", choices_[i].score}});
  ojson j = {{"id", id_}, {"model", model_}};
  j["usage"] = {{"total_tokens", usage_.prompt_tokens}};
  j["results"] = std::move(results);
  started_ = true;
  return dump(j);
}

std::string response_builder::score_body() {
  ojson data = ojson::array();
  for (size_t i = 0; i < choices_.size(); ++i)
    data.push_back({{"index", i}, {"object", "score"}, {"score", choices_[i].score}});
  ojson j = head("list");
  j["data"] = std::move(data);
  j["usage"] = {{"prompt_tokens", usage_.prompt_tokens}, {"total_tokens", usage_.prompt_tokens}};
  started_ = true;
  return dump(j);
}

std::string response_builder::classify_body() {
  ojson data = ojson::array();
  for (size_t i = 0; i < choices_.size(); ++i)
    data.push_back({{"index", i},
                    {"label", choices_[i].label},
                    {"probs", choices_[i].embedding},
                    {"num_classes", choices_[i].embedding.size()}});
  ojson j = head("list");
  j["data"] = std::move(data);
  j["usage"] = {{"prompt_tokens", usage_.prompt_tokens},
                {"total_tokens", usage_.prompt_tokens},
                {"completion_tokens", 0},
                {"prompt_tokens_details", nullptr}};
  started_ = true;
  return dump(j);
}

std::string response_builder::feed(const event& e) {
  if (complete_) return {};
  if (const auto* t = std::get_if<token_event>(&e)) return on_token(*t);
  if (const auto* d = std::get_if<done_event>(&e)) return on_done(done_event(*d));
  if (const auto* err = std::get_if<wire_error>(&e)) return on_error(*err);
  return {};
}

}  // namespace troupe::wire::openai
