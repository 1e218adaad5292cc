// What the OpenAI-compatible endpoints' parsers share (runtime/wire/openai.cpp,
// openai_tokenize.cpp, openai_responses.cpp, and anthropic_messages.cpp, which translates into
// chat too): refusals as exceptions caught at each parser's edge, the JSON helpers and the
// model-name check. Not for other users.
#pragma once

#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/wire/openai.hpp"
#include "runtime/wire/protocol.hpp"

namespace troupe::wire::openai::detail {

using ojson = nlohmann::ordered_json;

struct refusal {
  api_error e;
};

[[noreturn]] void refuse(std::string code, std::string param, std::string message, int status = 400);

// Every JSON text the API writes: invalid UTF-8 (a token's partial character in logprobs)
// becomes U+FFFD instead of an exception.
std::string dump(const ojson& j);

// Refuses `field` with wrong_type unless ok.
void want(const ojson& v, bool ok, const std::string& field, const char* expected);

// An object's fields, checked by name: any key outside `keys` is refused (unknown_field naming
// where.key); a missing or null `key` is refused (missing_field); need_string wants a string too.
void only_keys(const ojson& o, const std::string& where, std::initializer_list<std::string_view> keys);
const ojson& need(const ojson& o, const std::string& where, const char* key);
std::string need_string(const ojson& o, const std::string& where, const char* key);

// A function tool in chat's form, {"type": "function", "function": {name, description,
// parameters}}, from a flat tool object `t` (the Responses API's, Anthropic's) whose schema is at
// `schema_key` (required or not).
ojson chat_function_tool(const ojson& t, const std::string& where, const char* schema_key, bool schema_required);

// The request body as a JSON object, or a `malformed` refusal.
ojson parse_body(std::string_view body);

// A request's "model": true when it names a LoRA adapter, false for the served model; any other
// name is refused with 404 model_not_found.
bool names_adapter(const ojson& v, const served_models& models);

// vLLM's chat_template_kwargs into `w` (the protocol's request): enable_thinking as its own field,
// the others as the template's variables (chat_template_kwargs); a reserved name is refused.
void chat_template_kwargs(const ojson& v, ojson& w);

// `w` (a request in the msgpack protocol's fields) through the protocol's own decoder, so the HTTP
// API refuses exactly what the protocol refuses, in its words. Empty, with `error` set, if refused.
std::optional<request> decode_wire(const ojson& w, api_error& error);

// A token's raw bytes as logprobs carry them (`bytes`: an array of 0..255).
ojson bytes_json(const std::string& s);

// The answer text before the first tool call (what vLLM's hermes parser returns as content).
std::string content_before_calls(const std::string& text);

// OpenAI's chat messages in the protocol's form (content parts joined, "developer" as "system").
ojson messages(const ojson& m);

// A chat (or completions) request body, parsed: the generate in out.req, the response's settings
// beside it, or a refusal thrown. /v1/responses feeds it the chat request it translates into.
void parse_generate(endpoint ep, const ojson& b, const served_models& models, const std::string& id, parsed_request& out);

}  // namespace troupe::wire::openai::detail
