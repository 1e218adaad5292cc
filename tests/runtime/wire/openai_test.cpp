// The OpenAI-compatible API's translation: request bodies into generate requests (through the
// protocol's own decoder) and generate events into OpenAI's JSON bodies and server-sent events.
#include <boost/test/unit_test.hpp>
#include <map>
#include <nlohmann/json.hpp>

#include "runtime/wire/openai.hpp"
#include "runtime/wire/openai_responses.hpp"

namespace oa = troupe::wire::openai;
namespace wire = troupe::wire;
using json = nlohmann::json;

namespace {

const oa::served_models models{"qwen3", {"sql-lora"}, 4096};

oa::parsed_request chat(const std::string& body) { return oa::parse_request(oa::endpoint::chat, body, models, "chatcmpl-1"); }
oa::parsed_request completion(const std::string& body) {
  return oa::parse_request(oa::endpoint::completion, body, models, "cmpl-1");
}

std::string token_text(int32_t id) { return id == 7 ? std::string("\xe4\xbd", 2) : "t" + std::to_string(id); }

// The JSON objects of an SSE stream's data lines ("[DONE]" as the string "[DONE]").
std::vector<json> sse_events(const std::string& s) {
  std::vector<json> out;
  size_t at = 0;
  while ((at = s.find("data: ", at)) != std::string::npos) {
    auto end = s.find("\n\n", at);
    BOOST_TEST_REQUIRE(end != std::string::npos);
    auto data = s.substr(at + 6, end - at - 6);
    out.push_back(data == "[DONE]" ? json("[DONE]") : json::parse(data));
    at = end + 2;
  }
  return out;
}

wire::token_event tok(std::string text, int32_t id, std::optional<int32_t> index = {}) {
  wire::token_event t;
  t.id = "x";
  t.text = std::move(text);
  t.ids = {id};
  t.index = index;
  return t;
}

wire::done_event done(wire::finish_reason r, int64_t prompt, int64_t completion, std::optional<int32_t> index = {}) {
  wire::done_event d;
  d.reason = r;
  d.usage = {prompt, 2, completion};
  d.index = index;
  return d;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(openai)

BOOST_AUTO_TEST_CASE(chat_request_maps_onto_generate) {
  auto p = chat(R"({"model": "qwen3", "messages": [
      {"role": "system", "content": [{"type": "text", "text": "Be"}, {"type": "text", "text": "brief."}]},
      {"role": "user", "content": "Hi", "name": "ann"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": "f", "arguments": "{}"}}]},
      {"role": "tool", "content": "42", "tool_call_id": "c1"}],
    "max_completion_tokens": 12, "stop": "END", "user": "team-a", "temperature": 0, "top_k": 5,
    "logprobs": true, "top_logprobs": 3, "chat_template_kwargs": {"enable_thinking": false},
    "stream": true, "stream_options": {"include_usage": true}, "seed": null, "stop_token_ids": [151645],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}], "tool_choice": "auto"})");
  BOOST_TEST_REQUIRE(p.ok(), p.error.message);
  const auto& r = *p.req;
  BOOST_TEST(r.id == "chatcmpl-1");
  BOOST_TEST((r.kind == wire::prompt_kind::messages));
  BOOST_TEST_REQUIRE(r.messages.size() == 4u);
  BOOST_TEST(r.messages[0].content == "Be\nbrief.");  // parts joined by "\n", as vLLM joins them
  BOOST_TEST(r.messages[1].content == "Hi");
  BOOST_TEST(!r.messages[2].tool_calls_json.empty());
  BOOST_TEST(r.messages[3].role == "tool");
  BOOST_TEST(*r.max_tokens == 12);
  BOOST_TEST(r.stop == std::vector<std::string>{"END"});
  BOOST_TEST(r.stop_ids == std::vector<int32_t>{151645});
  BOOST_TEST(r.tenant == "team-a");
  BOOST_TEST(*r.sampling.temperature == 0.0);
  BOOST_TEST(*r.sampling.top_k == 5);
  BOOST_TEST(!r.sampling.seed.has_value());
  BOOST_TEST(*r.logprobs == 3);
  BOOST_TEST(*r.enable_thinking == false);
  BOOST_TEST(r.stream);
  BOOST_TEST(r.separate_reasoning);  // reasoning_content, as vLLM's qwen3 reasoning parser gives it
  BOOST_TEST(!r.tools_json.empty());
  BOOST_TEST(r.adapter.empty());
  BOOST_TEST(p.include_usage);
  BOOST_TEST(p.model == "qwen3");
}

BOOST_AUTO_TEST_CASE(defaults_adapters_and_tool_choice_none) {
  auto p = chat(R"({"model": "sql-lora", "messages": [{"role": "user", "content": "q"}], "tool_choice": "none",
                    "tools": [{"type": "function", "function": {"name": "f"}}]})");
  BOOST_TEST_REQUIRE(p.ok(), p.error.message);
  BOOST_TEST(p.req->adapter == "sql-lora");
  BOOST_TEST(p.model == "sql-lora");
  BOOST_TEST(p.req->tools_json.empty());
  BOOST_TEST(!p.req->stream);  // OpenAI's default
  BOOST_TEST(!p.req->logprobs.has_value());
  BOOST_TEST(!p.include_usage);
  BOOST_TEST(*p.req->max_tokens == 4096);  // to a stop or the context's end, as OpenAI's chat does
  auto legacy = completion(R"({"prompt": "x"})");
  BOOST_TEST_REQUIRE(legacy.ok());
  BOOST_TEST(*legacy.req->max_tokens == 16);  // OpenAI's (and vLLM's) completions default
  auto d = chat(R"({"messages": [{"role": "developer", "content": "Rules."}, {"role": "user", "content": "q"}]})");
  BOOST_TEST_REQUIRE(d.ok(), d.error.message);
  BOOST_TEST(d.req->messages[0].role == "system");  // OpenAI's newer name for it
  auto q = chat(R"({"messages": [{"role": "user", "content": "q"}]})");  // no model: the served one
  BOOST_TEST_REQUIRE(q.ok(), q.error.message);
  BOOST_TEST(q.model == "qwen3");
}

BOOST_AUTO_TEST_CASE(completion_prompt_forms) {
  auto a = completion(R"({"prompt": "Once", "max_tokens": 4, "logprobs": 2, "echo": false, "best_of": 1, "suffix": ""})");
  BOOST_TEST_REQUIRE(a.ok(), a.error.message);
  BOOST_TEST(a.req->prompt == "Once");
  BOOST_TEST(*a.req->logprobs == 2);
  BOOST_TEST(!a.req->separate_reasoning);
  auto b = completion(R"({"prompt": [1, 2, 3]})");
  BOOST_TEST_REQUIRE(b.ok(), b.error.message);
  BOOST_TEST((b.req->prompt_ids == std::vector<int32_t>{1, 2, 3}));
  auto c = completion(R"({"prompt": [[4, 5]]})");
  BOOST_TEST_REQUIRE(c.ok(), c.error.message);
  BOOST_TEST((c.req->prompt_ids == std::vector<int32_t>{4, 5}));
  auto d = completion(R"({"prompt": ["one"]})");
  BOOST_TEST_REQUIRE(d.ok(), d.error.message);
  BOOST_TEST(d.req->prompt == "one");
}

BOOST_AUTO_TEST_CASE(guided_fields_become_structured_outputs) {
  auto p = completion(R"({"prompt": "x", "guided_choice": ["yes", "no"]})");
  BOOST_TEST_REQUIRE(p.ok(), p.error.message);
  BOOST_TEST((p.req->structured.k == wire::structured_output::kind::choice));
  BOOST_TEST(p.req->structured.choices.size() == 2u);
  auto q = chat(R"({"messages": [{"role": "user", "content": "q"}],
                    "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "object"}}}})");
  BOOST_TEST_REQUIRE(q.ok(), q.error.message);
  BOOST_TEST((q.req->structured.k == wire::structured_output::kind::json_schema));
}

BOOST_AUTO_TEST_CASE(bad_requests_name_what_is_wrong) {
  struct bad_case {
    const char* body;
    bool chat;
    int status;
    const char* code;
    const char* mentions;
  };
  const bad_case cases[] = {
      {"not json", true, 400, "malformed", "not JSON"},
      {"[1]", true, 400, "malformed", "JSON object"},
      {R"({"messages": [{"role": "user", "content": "q"}], "temprature": 1})", true, 400, "unknown_field", "temprature"},
      {R"({"model": "gpt-4", "messages": [{"role": "user", "content": "q"}]})", true, 404, "model_not_found", "gpt-4"},
      {R"({"model": 3, "messages": []})", true, 400, "wrong_type", "model"},
      {R"({"max_tokens": 3})", true, 400, "missing_field", "messages"},
      {R"({"max_tokens": 3})", false, 400, "missing_field", "prompt"},
      {R"({"messages": [{"role": "user", "content": "q"}], "temperature": -1})", true, 400, "invalid_value", "temperature"},
      {R"({"messages": [{"role": "user", "content": "q"}], "max_tokens": 0})", true, 400, "invalid_value", "max_tokens"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]})", true, 400, "unsupported", "image_url"},
      {R"({"messages": [{"role": "user", "content": "q"}], "tool_choice": "required"})", true, 400, "invalid_value", "tool_choice"},
      {R"({"messages": [{"role": "user", "content": "q"}], "top_logprobs": 2})", true, 400, "invalid_value", "logprobs"},
      {R"({"messages": [{"role": "user", "content": "q"}], "stream_options": {"foo": 1}})", true, 400, "unknown_field", "stream_options.foo"},
      {R"({"messages": [{"role": "user", "content": "q"}], "chat_template_kwargs": {"messages": 1}})", true, 400, "invalid_value", "chat_template_kwargs.messages"},
      {R"({"messages": [{"role": "user", "content": "q"}], "stream": "yes"})", true, 400, "wrong_type", "stream"},
      {R"({"prompt": ["a", 3]})", false, 400, "wrong_type", "prompts[1]"},
      {R"({"prompt": ["a", ""]})", false, 400, "invalid_value", "prompts[1]"},
      {R"({"prompt": [[1], [2]], "n": 65})", false, 400, "invalid_value", "times 'n'"},
      {R"({"prompt": "a", "suffix": "z"})", false, 400, "unsupported", "suffix"},
      {R"({"prompt": "a", "best_of": 3})", false, 400, "unsupported", "best_of"},
      {R"({"prompt": {"a": 1}})", false, 400, "wrong_type", "prompt"},
      {R"({"prompt": "a", "messages": []})", false, 400, "unknown_field", "messages"},
      {R"({"prompt": "a", "seed": 1e400})", false, 400, "malformed", ""},
      {R"({"prompt": "a", "guided_regex": "x+", "structured_outputs": {"regex": "y"}})", false, 400, "invalid_value", "not both"},
      {R"({"messages": [{"role": "user", "content": [{"type": "text"}]}]})", true, 400, "missing_field", "messages[0].content[0]"},
      {R"({"messages": [{"role": "user", "content": [{"text": "x"}]}]})", true, 400, "missing_field", "type"},
      {R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "x", "cache": 1}]}]})", true, 400, "unknown_field", "messages[0].content[0].cache"},
      {R"({"messages": [{"role": "user", "content": [{"type": "text", "text": 3}]}]})", true, 400, "wrong_type", "messages[0].content[0].text"},
      {R"({"messages": [{"role": "user", "content": "q"}], "parallel_tool_calls": "yes"})", true, 400, "wrong_type", "parallel_tool_calls"},
      {R"({"messages": [{"role": "user", "content": "q"}], "include_reasoning": 1})", true, 400, "wrong_type", "include_reasoning"},
      {R"({"messages": [{"role": "user", "content": "q"}], "stream_options": {"include_usage": "y"}})", true, 400, "wrong_type", "include_usage"},
      {R"({"prompt": "a", "echo": "yes"})", false, 400, "wrong_type", "echo"},
      {R"({"prompt": "a", "suffix": 1})", false, 400, "wrong_type", "suffix"},
      {R"({"messages": [{"role": "user", "content": "q"}], "max_completion_tokens": -1})", true, 400, "invalid_value", "max_tokens"},
  };
  for (const auto& c : cases) {
    auto p = c.chat ? chat(c.body) : completion(c.body);
    BOOST_TEST_CONTEXT(c.body) {
      BOOST_TEST_REQUIRE(!p.ok());
      BOOST_TEST(p.error.status == c.status);
      BOOST_TEST(p.error.code == c.code);
      BOOST_TEST(p.error.message.find(c.mentions) != std::string::npos, p.error.message);
      auto body = json::parse(oa::error_body(p.error));
      BOOST_TEST(body["error"]["message"] == p.error.message);
      BOOST_TEST(body["error"]["code"] == c.code);
      BOOST_TEST(body["error"]["type"] == "invalid_request_error");
    }
  }
}

// OpenAI's newer chat fields: reasoning_effort "none" turns Qwen3's thinking off (unless
// chat_template_kwargs says otherwise); safety_identifier is the tenant unless `user` is given;
// store, metadata, service_tier, prompt_cache_key and verbosity are accepted and change nothing.
// vLLM's request_id (chat, completions, embeddings, rerank, score): kept for the gateway to name
// the response by; checked as an X-Request-Id header is.
BOOST_AUTO_TEST_CASE(request_id_field) {
  auto p = chat(R"({"messages": [{"role": "user", "content": "hi"}], "request_id": "trace-42/a.b"})");
  BOOST_TEST_REQUIRE(p.ok(), p.error.message);
  BOOST_TEST(*p.request_id == "trace-42/a.b");
  BOOST_TEST(p.req->id == "chatcmpl-1");  // the gateway decides (a header wins)
  BOOST_TEST(!chat(R"({"messages": [{"role": "user", "content": "hi"}]})").request_id);
  p = completion(R"({"prompt": "x", "request_id": "c1"})");
  BOOST_TEST((p.ok() && *p.request_id == "c1"));
  p = oa::parse_request(oa::endpoint::embeddings, R"({"input": "x", "request_id": "e1"})", models, "embd-1");
  BOOST_TEST((p.ok() && *p.request_id == "e1"));
  for (const std::string& bad : std::vector<std::string>{R"("has space")", R"("")", "7", "\"" + std::string(257, 'a') + "\"",
                                                        R"("tab\t")", R"("caf\u00e9")"}) {
    p = completion(R"({"prompt": "x", "request_id": )" + bad + "}");
    BOOST_TEST(!p.ok(), bad);
    BOOST_TEST(p.error.param == "request_id", bad);
  }
  BOOST_TEST(oa::valid_request_id(std::string(256, '~')));
  BOOST_TEST(!oa::valid_request_id(std::string(257, 'a')));
  BOOST_TEST(!oa::valid_request_id("a\x7f"));
}

BOOST_AUTO_TEST_CASE(invocations_are_routed_by_their_fields) {
  BOOST_TEST(*oa::invocation_path(R"({"messages": [], "prompt": "x"})") == "/v1/chat/completions");
  BOOST_TEST(*oa::invocation_path(R"({"prompt": "x"})") == "/v1/completions");
  BOOST_TEST(*oa::invocation_path(R"({"input": "x", "messages": null})") == "/v1/embeddings");
  BOOST_TEST(*oa::invocation_path(R"({"query": "q", "documents": []})") == "/v1/rerank");
  BOOST_TEST(*oa::invocation_path(R"({"text_1": "a", "text_2": "b"})") == "/v1/score");
  BOOST_TEST(*oa::invocation_path(R"({"queries": "a", "documents": "b"})") == "/v1/score");
  BOOST_TEST(!oa::invocation_path(R"({"max_tokens": 3})"));
  BOOST_TEST(!oa::invocation_path("[1]"));
  BOOST_TEST(!oa::invocation_path("{"));
}

// vLLM's fields that clients send with their defaults are accepted; another value is refused
// naming the field.
BOOST_AUTO_TEST_CASE(vllm_fields_at_their_defaults_are_accepted) {
  auto p = chat(R"({"messages": [{"role": "user", "content": "hi"}], "add_special_tokens": false,
      "guided_decoding_backend": "xgrammar", "use_beam_search": false, "length_penalty": 1.0,
      "spaces_between_special_tokens": true})");
  BOOST_TEST(p.ok(), p.error.message);
  p = completion(R"({"prompt": "x", "add_special_tokens": true, "use_beam_search": false})");
  BOOST_TEST(p.ok(), p.error.message);
  for (const auto& [body, param] : std::vector<std::pair<std::string, std::string>>{
           {R"({"prompt": "x", "spaces_between_special_tokens": false})", "spaces_between_special_tokens"},
           {R"({"prompt": "x", "add_special_tokens": "yes"})", "add_special_tokens"},
           {R"({"prompt": "x", "guided_decoding_backend": 3})", "guided_decoding_backend"}}) {
    p = completion(body);
    BOOST_TEST(!p.ok(), body);
    BOOST_TEST(p.error.param == param, body);
  }
}

// vLLM's use_beam_search: n is the beam width, length_penalty weighs the beams' lengths; what does
// not apply to beams is refused naming the field.
BOOST_AUTO_TEST_CASE(beam_search_fields) {
  auto p = completion(R"({"prompt": "x", "use_beam_search": true, "n": 3, "length_penalty": 0.8, "max_tokens": 5})");
  BOOST_TEST_REQUIRE(p.ok(), p.error.message);
  BOOST_TEST(p.req->use_beam_search);
  BOOST_TEST(p.req->n == 3);
  BOOST_TEST(p.req->length_penalty == 0.8);
  p = chat(R"({"messages": [{"role": "user", "content": "hi"}], "use_beam_search": true, "n": 2})");
  BOOST_TEST_REQUIRE(p.ok(), p.error.message);
  BOOST_TEST(p.req->use_beam_search);
  for (const auto& [body, param] : std::vector<std::pair<std::string, std::string>>{
           {R"({"prompt": "x", "use_beam_search": true, "n": 11})", "n"},
           {R"({"prompt": "x", "use_beam_search": true, "logprobs": 2})", "logprobs"},
           {R"({"prompt": "x", "use_beam_search": true, "min_tokens": 3})", "min_tokens"},
           {R"({"prompt": "x", "use_beam_search": true, "response_format": {"type": "json_object"}})", "response_format"},
           {R"({"prompt": "x", "use_beam_search": "yes"})", "use_beam_search"},
           {R"({"prompt": "x", "length_penalty": "long"})", "length_penalty"}}) {
    p = completion(body);
    BOOST_TEST(!p.ok(), body);
    BOOST_TEST(p.error.param == param, body << ": " << p.error.param << " / " << p.error.message);
  }
}

BOOST_AUTO_TEST_CASE(newer_chat_fields) {
  const std::string q = R"("messages": [{"role": "user", "content": "q"}])";
  auto p = chat("{" + q + R"(, "reasoning_effort": "none", "safety_identifier": "team-a", "store": false,
      "metadata": {"k": "v"}, "service_tier": "auto", "prompt_cache_key": "k", "verbosity": "low"})");
  BOOST_TEST_REQUIRE(p.ok(), p.error.message);
  BOOST_TEST((p.req->enable_thinking == std::optional<bool>(false)));
  BOOST_TEST(p.req->tenant == "team-a");
  p = chat("{" + q + R"(, "reasoning_effort": "high", "user": "u", "safety_identifier": "s"})");
  BOOST_TEST_REQUIRE(p.ok(), p.error.message);
  BOOST_TEST(!p.req->enable_thinking.has_value());
  BOOST_TEST(p.req->tenant == "u");
  p = chat("{" + q + R"(, "reasoning_effort": "none", "chat_template_kwargs": {"enable_thinking": true}})");
  BOOST_TEST_REQUIRE(p.ok(), p.error.message);
  BOOST_TEST((p.req->enable_thinking == std::optional<bool>(true)));
  for (const char* bad : {R"("reasoning_effort": 1)", R"("store": "yes")", R"("metadata": [])", R"("verbosity": 2)"}) {
    auto b = chat("{" + q + ", " + bad + "}");
    BOOST_TEST(b.error.code == "wrong_type", bad);
  }
  BOOST_TEST(completion(R"({"prompt": "a", "reasoning_effort": "none"})").error.code == "unknown_field");
}

BOOST_AUTO_TEST_CASE(non_streaming_chat_body) {
  auto p = chat(R"({"messages": [{"role": "user", "content": "q"}]})");
  BOOST_TEST_REQUIRE(p.ok());
  oa::response_builder b(oa::endpoint::chat, p, 1700000000, token_text);
  auto d = done(wire::finish_reason::length, 9, 4);
  d.has_output = true;
  d.text = "Hello";
  d.reasoning = "Thinking.";
  d.ids = {1, 2, 3, 4};
  auto body = b.feed(d);
  BOOST_TEST(b.complete());
  BOOST_TEST(b.status() == 200);
  BOOST_TEST(!b.streaming());
  auto j = json::parse(body);
  BOOST_TEST(j["id"] == "chatcmpl-1");
  BOOST_TEST(j["object"] == "chat.completion");
  BOOST_TEST(j["created"] == 1700000000);
  BOOST_TEST(j["model"] == "qwen3");
  BOOST_TEST(j["choices"][0]["message"]["role"] == "assistant");
  BOOST_TEST(j["choices"][0]["message"]["content"] == "Hello");
  BOOST_TEST(j["choices"][0]["message"]["reasoning_content"] == "Thinking.");
  BOOST_TEST(j["choices"][0]["finish_reason"] == "length");
  BOOST_TEST(j["choices"][0]["logprobs"].is_null());
  BOOST_TEST(j["usage"]["prompt_tokens"] == 9);
  BOOST_TEST(j["usage"]["completion_tokens"] == 4);
  BOOST_TEST(j["usage"]["total_tokens"] == 13);
  BOOST_TEST(j["usage"]["prompt_tokens_details"]["cached_tokens"] == 2);
  BOOST_TEST(b.feed(done(wire::finish_reason::stop, 1, 1)).empty());  // after the end: nothing
}

// /v1/embeddings: the body is the embed request; the response lists each input's embedding in
// input order whatever order the done events come in, usage summed, base64 the float32 bytes; an
// input that ends without its embedding fails the response.
BOOST_AUTO_TEST_CASE(embeddings_request_and_response) {
  auto p = oa::parse_request(oa::endpoint::embeddings, R"({"model": "qwen3", "input": ["a", "b"], "dimensions": 2})",
                             models, "embd-1");
  BOOST_TEST_REQUIRE(p.ok(), p.error.message);
  BOOST_TEST_REQUIRE(p.req->embed.has_value());
  BOOST_TEST(p.req->n == 2);
  BOOST_TEST(p.req->embed->dimensions.value() == 2);
  BOOST_TEST(!p.base64);
  auto embedded = [](int32_t index, std::vector<float> v, int64_t prompt) {
    wire::done_event d;
    d.id = "embd-1";
    d.index = index;
    d.usage.prompt_tokens = prompt;
    d.embedding = std::move(v);
    return d;
  };
  {
    oa::response_builder b(oa::endpoint::embeddings, p, 5, token_text);
    BOOST_TEST(b.feed(embedded(1, {0.25f, -1.0f}, 3)).empty());
    auto j = json::parse(b.feed(embedded(0, {0.5f, 0.75f}, 4)));
    BOOST_TEST(b.complete());
    BOOST_TEST(j["object"] == "list");
    BOOST_TEST(j["data"][0]["index"] == 0);
    BOOST_TEST((j["data"][0]["embedding"].get<std::vector<float>>() == std::vector<float>{0.5f, 0.75f}));
    BOOST_TEST((j["data"][1]["embedding"].get<std::vector<float>>() == std::vector<float>{0.25f, -1.0f}));
    BOOST_TEST(j["usage"]["prompt_tokens"] == 7);
    BOOST_TEST(j["usage"]["total_tokens"] == 7);
  }
  {
    auto q = oa::parse_request(oa::endpoint::embeddings, R"({"input": [1, 2], "encoding_format": "base64"})", models, "e");
    BOOST_TEST_REQUIRE(q.ok(), q.error.message);
    oa::response_builder b(oa::endpoint::embeddings, q, 5, token_text);
    // 1.0f, -2.0f little-endian: 00 00 80 3f 00 00 00 c0
    auto j = json::parse(b.feed(embedded(0, {1.0f, -2.0f}, 2)));
    BOOST_TEST(j["data"][0]["embedding"] == "AACAPwAAAMA=");
  }
  {
    oa::response_builder b(oa::endpoint::embeddings, p, 5, token_text);
    BOOST_TEST(b.feed(embedded(0, {0.5f, 0.75f}, 4)).empty());
    auto cut = embedded(1, {}, 3);
    cut.embedding.reset();
    cut.reason = wire::finish_reason::cancelled;
    auto j = json::parse(b.feed(cut));
    BOOST_TEST(b.complete());
    BOOST_TEST(b.status() == 500);
    BOOST_TEST(j["error"]["message"].get<std::string>().find("input 1 ended without its embedding") != std::string::npos);
  }
  for (const char* bad : {R"({"input": "x", "encoding_format": "hex"})", R"({"input": "x", "temperature": 0})",
                          R"({"model": "sql-lora", "input": "x"})", R"({"model": "qwen3"})"}) {
    auto e = oa::parse_request(oa::endpoint::embeddings, bad, models, "e");
    BOOST_TEST(!e.ok(), bad);
    BOOST_TEST(e.error.status == 400, bad);
  }
}

// /v1/rerank: the body is the rerank request; the results come best first (equal scores in the
// documents' order), each with its document, top_n keeps the best, usage sums the prompts; a
// document that ends without its score fails the response; bad bodies are 400s.
// /classify: the body is the embed request with task classify; the response lists each input's
// label and probabilities in input order, usage summed; an input that ends without them fails the
// response; embedding-only fields and an adapter are refused.
BOOST_AUTO_TEST_CASE(classify_request_and_response) {
  auto p = oa::parse_request(oa::endpoint::classify, R"({"input": ["a", "b"], "add_special_tokens": true})", models,
                             "classify-1");
  BOOST_TEST_REQUIRE(p.ok(), p.error.message);
  BOOST_TEST_REQUIRE(p.req->embed.has_value());
  BOOST_TEST(p.req->embed->classify);
  BOOST_TEST(p.req->n == 2);
  auto classified = [](int32_t index, std::vector<float> probs, std::string label) {
    wire::done_event d;
    d.id = "classify-1";
    d.index = index;
    d.usage.prompt_tokens = 2;
    d.probs = std::move(probs);
    d.label = std::move(label);
    return d;
  };
  {
    oa::response_builder b(oa::endpoint::classify, p, 5, token_text);
    BOOST_TEST(b.feed(classified(1, {0.25f, 0.75f}, "pos")).empty());
    auto j = json::parse(b.feed(classified(0, {0.5f, 0.5f}, "neg")));
    BOOST_TEST(b.complete());
    BOOST_TEST(j["object"] == "list");
    BOOST_TEST(j["data"][0]["label"] == "neg");
    BOOST_TEST(j["data"][1]["label"] == "pos");
    BOOST_TEST((j["data"][1]["probs"].get<std::vector<float>>() == std::vector<float>{0.25f, 0.75f}));
    BOOST_TEST(j["data"][1]["num_classes"] == 2);
    BOOST_TEST(j["usage"]["prompt_tokens"] == 4);
    BOOST_TEST(j["usage"]["completion_tokens"] == 0);
  }
  {
    oa::response_builder b(oa::endpoint::classify, p, 5, token_text);
    BOOST_TEST(b.feed(classified(0, {1.0f}, "only")).empty());
    auto cut = classified(1, {}, "");
    cut.probs.reset();
    cut.reason = wire::finish_reason::cancelled;
    auto j = json::parse(b.feed(cut));
    BOOST_TEST(b.status() == 500);
    BOOST_TEST(j["error"]["message"].get<std::string>().find("input 1 ended without its label probabilities") !=
               std::string::npos);
  }
  for (const char* bad : {R"({"input": "x", "dimensions": 4})", R"({"model": "sql-lora", "input": "x"})",
                          R"({"model": "qwen3"})", R"({"input": "x", "add_special_tokens": 1})"}) {
    auto e = oa::parse_request(oa::endpoint::classify, bad, models, "c");
    BOOST_TEST(!e.ok(), bad);
    BOOST_TEST(e.error.status == 400, bad);
  }
}

BOOST_AUTO_TEST_CASE(rerank_request_and_response) {
  auto p = oa::parse_request(oa::endpoint::rerank,
                             R"({"model": "qwen3", "query": "q", "documents": ["a", "b", "c"], "instruction": "i", "user": "u"})",
                             models, "rerank-1");
  BOOST_TEST_REQUIRE(p.ok(), p.error.message);
  BOOST_TEST_REQUIRE(p.req->rerank.has_value());
  BOOST_TEST(p.req->n == 3);
  BOOST_TEST(p.req->rerank->instruction.value() == "i");
  BOOST_TEST(p.req->tenant == "u");
  BOOST_TEST(p.top_n == 0);
  auto scored = [](int32_t index, double score, int64_t prompt) {
    wire::done_event d;
    d.id = "rerank-1";
    d.index = index;
    d.usage.prompt_tokens = prompt;
    d.score = score;
    return d;
  };
  {
    oa::response_builder b(oa::endpoint::rerank, p, 5, token_text);
    BOOST_TEST(b.feed(scored(2, 0.25, 3)).empty());
    BOOST_TEST(b.feed(scored(0, 0.25, 4)).empty());
    auto j = json::parse(b.feed(scored(1, 0.75, 5)));
    BOOST_TEST(b.complete());
    BOOST_TEST(b.status() == 200);
    BOOST_TEST(j["id"] == "rerank-1");
    BOOST_TEST(j["model"] == "qwen3");
    BOOST_TEST(j["usage"]["total_tokens"] == 12);
    BOOST_TEST_REQUIRE(j["results"].size() == 3u);
    BOOST_TEST(j["results"][0]["index"] == 1);
    BOOST_TEST(j["results"][0]["document"]["text"] == "b");
    BOOST_TEST(j["results"][0]["relevance_score"] == 0.75);
    BOOST_TEST(j["results"][1]["index"] == 0);  // ties: the documents' order
    BOOST_TEST(j["results"][2]["index"] == 2);
  }
  {
    auto q = oa::parse_request(oa::endpoint::rerank, R"({"query": "q", "documents": ["a", "b", "c"], "top_n": 2})", models, "k");
    BOOST_TEST_REQUIRE(q.ok(), q.error.message);
    BOOST_TEST(q.top_n == 2);
    oa::response_builder b(oa::endpoint::rerank, q, 5, token_text);
    b.feed(scored(0, 0.1, 1));
    b.feed(scored(1, 0.9, 1));
    auto j = json::parse(b.feed(scored(2, 0.5, 1)));
    BOOST_TEST_REQUIRE(j["results"].size() == 2u);
    BOOST_TEST(j["results"][0]["index"] == 1);
    BOOST_TEST(j["results"][1]["index"] == 2);
  }
  {
    oa::response_builder b(oa::endpoint::rerank, p, 5, token_text);
    BOOST_TEST(b.feed(scored(0, 0.5, 4)).empty());
    auto cut = scored(1, 0, 3);
    cut.score.reset();
    cut.reason = wire::finish_reason::cancelled;
    auto j = json::parse(b.feed(cut));
    BOOST_TEST(b.complete());
    BOOST_TEST(b.status() == 500);
    BOOST_TEST(j["error"]["message"].get<std::string>().find("document 1 ended without its score") != std::string::npos);
  }
  for (const char* bad : {R"({"documents": ["a"]})", R"({"query": "q"})", R"({"query": "q", "documents": ["a"], "top_n": -1})",
                          R"({"query": "q", "documents": ["a"], "temperature": 0})", R"({"model": "sql-lora", "query": "q", "documents": ["a"]})",
                          R"({"query": "q", "documents": "a"})", R"({"query": "q", "documents": ["a", ""]})"}) {
    auto e = oa::parse_request(oa::endpoint::rerank, bad, models, "k");
    BOOST_TEST(!e.ok(), bad);
    BOOST_TEST(e.error.status == 400, bad);
  }
}

// /v1/score: text_1 (one text, or a list of one) against each of text_2 becomes the rerank
// request, as many text_1 as text_2 its pairs; the scores come back in text_2's order.
BOOST_AUTO_TEST_CASE(score_request_and_response) {
  for (const char* body : {R"({"text_1": "q", "text_2": ["a", "b"]})", R"({"text_1": ["q"], "text_2": ["a", "b"]})"}) {
    auto p = oa::parse_request(oa::endpoint::score, body, models, "score-1");
    BOOST_TEST_REQUIRE(p.ok(), p.error.message);
    BOOST_TEST(p.req->rerank->queries == std::vector<std::string>{"q"});
    BOOST_TEST(p.req->rerank->documents == (std::vector<std::string>{"a", "b"}), boost::test_tools::per_element());
    oa::response_builder b(oa::endpoint::score, p, 5, token_text);
    wire::done_event d;
    d.id = "score-1";
    d.index = 1;
    d.usage.prompt_tokens = 3;
    d.score = 0.75;
    BOOST_TEST(b.feed(d).empty());
    d.index = 0;
    d.score = 0.25;
    auto j = json::parse(b.feed(d));
    BOOST_TEST(j["object"] == "list");
    BOOST_TEST(j["data"][0]["index"] == 0);
    BOOST_TEST(j["data"][0]["object"] == "score");
    BOOST_TEST(j["data"][0]["score"] == 0.25);  // text_2's order, not sorted
    BOOST_TEST(j["data"][1]["score"] == 0.75);
    BOOST_TEST(j["usage"]["total_tokens"] == 6);
  }
  auto one = oa::parse_request(oa::endpoint::score, R"({"text_1": "q", "text_2": "a"})", models, "s");
  BOOST_TEST_REQUIRE(one.ok(), one.error.message);
  BOOST_TEST(one.req->n == 1);
  // N:N pairs text_1[i] with text_2[i]: one query per document.
  auto pairwise = oa::parse_request(oa::endpoint::score, R"({"text_1": ["q1", "q2"], "text_2": ["a", "b"]})", models, "s");
  BOOST_TEST_REQUIRE(pairwise.ok(), pairwise.error.message);
  BOOST_TEST(pairwise.req->rerank->queries == (std::vector<std::string>{"q1", "q2"}), boost::test_tools::per_element());
  BOOST_TEST(pairwise.req->rerank->query_for(1) == "q2");
  BOOST_TEST(pairwise.req->n == 2);
  // N:M (M != N) is refused as vLLM refuses it; the decoder's errors name the client's fields.
  for (auto [body, needle] : {std::pair{R"({"text_1": ["q1", "q2"], "text_2": ["a", "b", "c"]})", "text_1 has 2 texts and text_2 3"},
                              {R"({"text_1": ["q1", "q2"], "text_2": "a"})", "text_1 has 2 texts and text_2 1"},
                              {R"({"text_1": "q", "text_2": ["a", ""]})", "'text_2[1]' must not be empty"},
                              {R"({"text_1": ["q", ""], "text_2": ["a", "b"]})", "'text_1[1]' must not be empty"},
                              {R"({"text_1": "", "text_2": ["a"]})", "'text_1' must not be empty"}}) {
    auto e = oa::parse_request(oa::endpoint::score, body, models, "s");
    BOOST_TEST_REQUIRE(!e.ok(), body);
    BOOST_TEST(e.error.status == 400, body);
    BOOST_TEST(e.error.message.find(needle) != std::string::npos, e.error.message);
  }
  for (const char* bad : {R"({"text_2": ["a"]})", R"({"text_1": "q"})", R"({"text_1": "q", "text_2": [""]})",
                          R"({"text_1": [], "text_2": ["a"]})", R"({"text_1": 3, "text_2": ["a"]})",
                          R"({"text_1": "q", "text_2": ["a"], "top_n": 1})"}) {
    auto e = oa::parse_request(oa::endpoint::score, bad, models, "s");
    BOOST_TEST(!e.ok(), bad);
    BOOST_TEST(e.error.status == 400, bad);
  }
}

BOOST_AUTO_TEST_CASE(tool_calls_in_a_whole_body) {
  auto p = chat(R"({"messages": [{"role": "user", "content": "q"}], "tools": [{"type": "function", "function": {"name": "f"}}]})");
  BOOST_TEST_REQUIRE(p.ok());
  oa::response_builder b(oa::endpoint::chat, p, 1, token_text);
  auto d = done(wire::finish_reason::stop, 3, 5);
  d.has_output = true;
  d.text = "Let me look.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>";
  d.tool_calls = {{"f", "{\"a\": 1}"}};
  auto j = json::parse(b.feed(d));
  const auto& m = j["choices"][0]["message"];
  BOOST_TEST(m["content"] == "Let me look.");
  BOOST_TEST(m["tool_calls"][0]["type"] == "function");
  BOOST_TEST(m["tool_calls"][0]["function"]["name"] == "f");
  BOOST_TEST(m["tool_calls"][0]["function"]["arguments"] == "{\"a\": 1}");
  BOOST_TEST(!m["tool_calls"][0]["id"].get<std::string>().empty());
  BOOST_TEST(j["choices"][0]["finish_reason"] == "tool_calls");
}

// A forced tool call (tool_choice naming a function, or "required", as vLLM serves them): the
// output is constrained to the call's JSON and answered as tool_calls with finish_reason "stop";
// cut short, it stays content. Bad choices are refused naming tool_choice.
BOOST_AUTO_TEST_CASE(forced_tool_calls) {
  const std::string tools = R"("tools": [{"type": "function", "function": {"name": "weather", "parameters":
      {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
      {"type": "function", "function": {"name": "time"}}])";
  const std::string msgs = R"("messages": [{"role": "user", "content": "q"}])";
  auto p = chat("{" + msgs + ", " + tools + R"(, "tool_choice": {"type": "function", "function": {"name": "weather"}}})");
  BOOST_TEST_REQUIRE(p.ok(), p.error.message);
  BOOST_TEST_REQUIRE(p.forced_tools.has_value());
  BOOST_TEST((p.req->structured.k == wire::structured_output::kind::json_schema));
  BOOST_TEST(json::parse(p.req->structured.spec) ==
             json::parse(R"({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})"));
  {
    oa::response_builder b(oa::endpoint::chat, p, 1, token_text);
    auto d = done(wire::finish_reason::stop, 3, 5);
    d.has_output = true;
    d.text = R"({"city": "Paris"})";
    auto j = json::parse(b.feed(d));
    const auto& m = j["choices"][0]["message"];
    BOOST_TEST(m["content"].is_null());
    BOOST_TEST(m["tool_calls"][0]["function"]["name"] == "weather");
    BOOST_TEST(m["tool_calls"][0]["function"]["arguments"] == R"({"city": "Paris"})");
    BOOST_TEST(j["choices"][0]["finish_reason"] == "stop");
  }
  {  // cut short by max_tokens: no call, the text as content
    oa::response_builder b(oa::endpoint::chat, p, 1, token_text);
    auto d = done(wire::finish_reason::length, 3, 5);
    d.has_output = true;
    d.text = R"({"city": "Pa)";
    auto j = json::parse(b.feed(d));
    BOOST_TEST(j["choices"][0]["message"]["content"] == R"({"city": "Pa)");
    BOOST_TEST(!j["choices"][0]["message"].contains("tool_calls"));
    BOOST_TEST(j["choices"][0]["finish_reason"] == "length");
  }
  // "required": an array of calls, each one of the tools; streamed, held back and sent whole.
  auto q = chat("{" + msgs + ", " + tools + R"(, "tool_choice": "required", "stream": true})");
  BOOST_TEST_REQUIRE(q.ok(), q.error.message);
  const auto schema = json::parse(q.req->structured.spec);
  BOOST_TEST(schema["type"] == "array");
  BOOST_TEST(schema["minItems"] == 1);
  BOOST_TEST(schema["items"]["anyOf"].size() == 2u);
  BOOST_TEST(schema["items"]["anyOf"][1]["properties"]["name"]["enum"][0] == "time");
  BOOST_TEST(schema["items"]["anyOf"][1]["properties"]["parameters"] == json::parse(R"({"type": "object", "properties": {}})"));
  BOOST_TEST(!schema.contains("maxItems"));
  auto one = chat("{" + msgs + ", " + tools + R"(, "tool_choice": "required", "parallel_tool_calls": false})");
  BOOST_TEST_REQUIRE(one.ok(), one.error.message);
  BOOST_TEST(json::parse(one.req->structured.spec)["maxItems"] == 1);
  oa::response_builder b(oa::endpoint::chat, q, 1, token_text);
  std::string s = b.feed(tok(R"([{"name": "time", )", 1));
  s += b.feed(tok(R"("parameters": {}}, {"name": "weather", "parameters": {"city": "Oslo"}}])", 2));
  s += b.feed(done(wire::finish_reason::stop, 3, 2));
  auto ev = sse_events(s);
  std::string content;
  json calls;
  std::string finish;
  for (const auto& e : ev) {
    if (e == "[DONE]") continue;
    const auto& c = e["choices"][0];
    if (c["delta"].contains("content")) content += c["delta"]["content"].get<std::string>();
    if (c["delta"].contains("tool_calls")) calls = c["delta"]["tool_calls"];
    if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
  }
  BOOST_TEST(content.empty(), content);
  BOOST_TEST_REQUIRE(calls.size() == 2u);
  BOOST_TEST(calls[0]["function"]["name"] == "time");
  BOOST_TEST(calls[0]["function"]["arguments"] == "{}");
  BOOST_TEST(calls[1]["function"]["name"] == "weather");
  BOOST_TEST(json::parse(calls[1]["function"]["arguments"].get<std::string>())["city"] == "Oslo");
  BOOST_TEST(finish == "stop");
  for (const auto& [body, needle] : std::vector<std::pair<std::string, std::string>>{
           {"{" + msgs + R"(, "tool_choice": "required"})", "offers no tools"},
           {"{" + msgs + ", " + tools + R"(, "tool_choice": {"type": "function", "function": {"name": "nope"}}})",
            "'nope', which is not among the tools"},
           {"{" + msgs + ", " + tools + R"(, "tool_choice": "always"})", "tool_choice must be"},
           {"{" + msgs + ", " + tools + R"(, "tool_choice": "required", "response_format": {"type": "json_object"}})",
            "fixes the output's format"}}) {
    auto e = chat(body);
    BOOST_TEST_REQUIRE(!e.ok(), body);
    BOOST_TEST(e.error.status == 400);
    BOOST_TEST(e.error.param == "tool_choice", e.error.message);
    BOOST_TEST(e.error.message.find(needle) != std::string::npos, e.error.message);
  }
}

BOOST_AUTO_TEST_CASE(streaming_chat_events) {
  auto p = chat(R"({"messages": [{"role": "user", "content": "q"}], "stream": true, "stream_options": {"include_usage": true}})");
  BOOST_TEST_REQUIRE(p.ok());
  oa::response_builder b(oa::endpoint::chat, p, 5, token_text);
  std::string s;
  auto t1 = tok("", 10);
  t1.reasoning = "hmm";
  s += b.feed(t1);
  BOOST_TEST(b.started());
  BOOST_TEST(b.streaming());
  s += b.feed(tok("Hel", 11));
  s += b.feed(tok("", 12));  // an incomplete character: no event
  s += b.feed(tok("lo", 13));
  BOOST_TEST(!b.complete());
  s += b.feed(done(wire::finish_reason::stop, 6, 4));
  BOOST_TEST(b.complete());
  auto ev = sse_events(s);
  BOOST_TEST_REQUIRE(ev.size() == 6u);
  BOOST_TEST(ev[0]["object"] == "chat.completion.chunk");
  BOOST_TEST(ev[0]["choices"][0]["delta"]["role"] == "assistant");
  BOOST_TEST(ev[0]["choices"][0]["delta"]["reasoning_content"] == "hmm");
  BOOST_TEST(ev[0]["usage"].is_null());
  BOOST_TEST(ev[1]["choices"][0]["delta"]["content"] == "Hel");
  BOOST_TEST(!ev[1]["choices"][0]["delta"].contains("role"));
  BOOST_TEST(ev[2]["choices"][0]["delta"]["content"] == "lo");
  BOOST_TEST(ev[3]["choices"][0]["finish_reason"] == "stop");
  BOOST_TEST(ev[4]["choices"].empty());
  BOOST_TEST(ev[4]["usage"]["completion_tokens"] == 4);
  BOOST_TEST(ev[5] == "[DONE]");
}

BOOST_AUTO_TEST_CASE(streamed_tool_calls_are_held_back_from_content) {
  auto p = chat(R"({"messages": [{"role": "user", "content": "q"}], "stream": true,
                    "tools": [{"type": "function", "function": {"name": "f"}}]})");
  BOOST_TEST_REQUIRE(p.ok());
  oa::response_builder b(oa::endpoint::chat, p, 5, token_text);
  std::string s;
  for (const char* piece : {"Sure", ". <", "tool", "_call>\n{\"name\": \"f\",", " \"arguments\": {}}\n</tool_call>"})
    s += b.feed(tok(piece, 1));
  auto d = done(wire::finish_reason::stop, 6, 5);
  d.tool_calls = {{"f", "{}"}};
  s += b.feed(d);
  std::string content;
  json calls;
  std::string finish;
  for (const auto& e : sse_events(s)) {
    if (e == "[DONE]") continue;
    const auto& c = e["choices"][0];
    if (c["delta"].contains("content")) content += c["delta"]["content"].get<std::string>();
    if (c["delta"].contains("tool_calls")) calls = c["delta"]["tool_calls"];
    if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
  }
  BOOST_TEST(content == "Sure. ");
  BOOST_TEST_REQUIRE(calls.size() == 1u);
  BOOST_TEST(calls[0]["index"] == 0);
  BOOST_TEST(calls[0]["function"]["name"] == "f");
  BOOST_TEST(finish == "tool_calls");

  // A "<tool" that turns out to be text comes out as text.
  oa::response_builder b2(oa::endpoint::chat, p, 5, token_text);
  std::string s2;
  s2 += b2.feed(tok("a <tool", 1));
  s2 += b2.feed(tok("box", 2));
  s2 += b2.feed(tok(" <tool_call>oops", 3));
  s2 += b2.feed(done(wire::finish_reason::length, 1, 3));
  content.clear();
  for (const auto& e : sse_events(s2))
    if (e != "[DONE]" && e["choices"][0]["delta"].contains("content")) content += e["choices"][0]["delta"]["content"].get<std::string>();
  BOOST_TEST(content == "a <toolbox <tool_call>oops");
}

// With stream_tool_arguments (a server reading Qwen3's JSON calls), each call streams as vLLM
// streams it: a first piece with its id, type and name, then its arguments in pieces that add up to
// the arguments the model wrote (the same JSON value as the whole call's); calls shaped otherwise
// come whole at the end; the finish reason is tool_calls.
BOOST_AUTO_TEST_CASE(streamed_tool_call_arguments_come_piece_by_piece) {
  auto p = chat(R"({"messages": [{"role": "user", "content": "q"}], "stream": true,
                    "tools": [{"type": "function", "function": {"name": "f"}}, {"type": "function", "function": {"name": "g"}}]})");
  BOOST_TEST_REQUIRE(p.ok());
  p.stream_tool_arguments = true;
  const std::string args = R"({"path": "a.c", "text": "int main() { return 0; }\n"})";
  const std::string text = "Sure.\n<tool_call>\n{\"name\": \"f\", \"arguments\": " + args +
                           "}\n</tool_call>\n<tool_call>\n{\"arguments\": {\"x\": 1}, \"name\": \"g\"}\n</tool_call>";
  oa::response_builder b(oa::endpoint::chat, p, 5, token_text);
  std::string s;
  for (size_t i = 0; i < text.size(); i += 4) s += b.feed(tok(text.substr(i, 4), 1));
  auto d = done(wire::finish_reason::stop, 6, 5);
  d.tool_calls = {{"f", json::parse(args).dump()}, {"g", R"({"x":1})"}};
  s += b.feed(d);
  std::string content, finish;
  std::map<int, json> calls;  // by index: id, name, arguments as streamed
  int pieces = 0;
  for (const auto& e : sse_events(s)) {
    if (e == "[DONE]") continue;
    const auto& c = e["choices"][0];
    if (c["delta"].contains("content")) content += c["delta"]["content"].get<std::string>();
    for (const auto& tc : c["delta"].value("tool_calls", json::array())) {
      auto& call = calls[tc["index"].get<int>()];
      if (tc.contains("id")) {
        BOOST_TEST(!call.contains("id"));  // announced once
        call["id"] = tc["id"];
        call["name"] = tc["function"]["name"];
        call["arguments"] = "";
      }
      call["arguments"] = call["arguments"].get<std::string>() + tc["function"]["arguments"].get<std::string>();
      ++pieces;
    }
    if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
  }
  BOOST_TEST(content == "Sure.\n");
  BOOST_TEST_REQUIRE(calls.size() == 2u);
  BOOST_TEST(calls[0]["name"] == "f");
  BOOST_TEST(calls[0]["arguments"] == args);  // as the model wrote it
  BOOST_TEST(json::parse(calls[0]["arguments"].get<std::string>()) == json::parse(d.tool_calls[0].arguments));
  BOOST_TEST(calls[1]["name"] == "g");  // shaped otherwise: whole, at the end
  BOOST_TEST(calls[1]["arguments"] == R"({"x":1})");
  BOOST_TEST(calls[0]["id"] != calls[1]["id"]);
  BOOST_TEST(pieces > 3);
  BOOST_TEST(finish == "tool_calls");
}

// vLLM's stream_options.continuous_usage_stats (with include_usage): every chunk carries its
// choice's usage so far (the prompt's tokens from the first token event), the last one done's.
BOOST_AUTO_TEST_CASE(continuous_usage_in_every_chunk) {
  auto p = completion(R"({"prompt": "a", "stream": true, "n": 2,
                          "stream_options": {"include_usage": true, "continuous_usage_stats": true}})");
  BOOST_TEST_REQUIRE(p.ok(), p.error.message);
  BOOST_TEST(p.continuous_usage);
  oa::response_builder b(oa::endpoint::completion, p, 5, token_text);
  std::string s;
  for (int i = 0; i < 3; ++i)
    for (int32_t c = 0; c < 2; ++c) {
      auto t = tok("x", 5, c);
      if (i == 0) t.prompt_tokens = 7;
      s += b.feed(t);
    }
  for (int32_t c = 0; c < 2; ++c) s += b.feed(done(wire::finish_reason::length, 7, 3, c));
  std::map<int, std::vector<int64_t>> seen;  // completion tokens in each choice's chunks
  for (const auto& e : sse_events(s)) {
    if (e == "[DONE]" || e["choices"].empty()) continue;
    BOOST_TEST_REQUIRE(e["usage"].is_object());
    BOOST_TEST(e["usage"]["prompt_tokens"] == 7);
    BOOST_TEST(e["usage"]["total_tokens"] == 7 + e["usage"]["completion_tokens"].get<int64_t>());
    seen[e["choices"][0]["index"].get<int>()].push_back(e["usage"]["completion_tokens"]);
  }
  for (int c = 0; c < 2; ++c) BOOST_TEST(seen[c] == (std::vector<int64_t>{1, 2, 3, 3}), boost::test_tools::per_element());
  // Without include_usage it asks for nothing (as vLLM); a non-boolean is refused.
  auto q = completion(R"({"prompt": "a", "stream": true, "stream_options": {"continuous_usage_stats": true}})");
  BOOST_TEST_REQUIRE(q.ok());
  oa::response_builder b2(oa::endpoint::completion, q, 5, token_text);
  BOOST_TEST(!sse_events(b2.feed(tok("x", 5)))[0].contains("usage"));
  BOOST_TEST(completion(R"({"prompt": "a", "stream_options": {"continuous_usage_stats": 1}})").error.code == "wrong_type");
}

BOOST_AUTO_TEST_CASE(an_error_before_output_is_an_http_error) {
  auto p = chat(R"({"messages": [{"role": "user", "content": "q"}], "stream": true})");
  BOOST_TEST_REQUIRE(p.ok());
  oa::response_builder b(oa::endpoint::chat, p, 5, token_text);
  auto body = b.feed(wire::wire_error{wire::error_code::prompt_too_long, "the prompt has 9000 tokens", "chatcmpl-1"});
  BOOST_TEST(b.complete());
  BOOST_TEST(b.status() == 400);
  BOOST_TEST(!b.streaming());
  BOOST_TEST(json::parse(body)["error"]["code"] == "prompt_too_long");

  oa::response_builder c(oa::endpoint::completion, completion(R"({"prompt": "x"})"), 5, token_text);
  auto d = done(wire::finish_reason::error, 1, 0);
  d.error = wire::wire_error{wire::error_code::internal, "the executor failed", ""};
  body = c.feed(d);
  BOOST_TEST(c.status() == 500);
  BOOST_TEST(json::parse(body)["error"]["type"] == "server_error");

  // Mid-stream, an error is an event of its own before [DONE].
  oa::response_builder m(oa::endpoint::chat, p, 5, token_text);
  auto s = m.feed(tok("a", 1));
  s += m.feed(d);
  auto ev = sse_events(s);
  BOOST_TEST(m.status() == 200);
  BOOST_TEST_REQUIRE(ev.size() == 4u);
  BOOST_TEST(ev[1]["choices"][0]["finish_reason"] == "error");
  BOOST_TEST(ev[2]["error"]["message"] == "the executor failed");
  BOOST_TEST(ev[3] == "[DONE]");
}

BOOST_AUTO_TEST_CASE(n_completions_gathered_in_one_body) {
  auto p = completion(R"({"prompt": "x", "n": 2, "logprobs": 1})");
  BOOST_TEST_REQUIRE(p.ok(), p.error.message);
  oa::response_builder b(oa::endpoint::completion, p, 5, token_text);
  auto d1 = done(wire::finish_reason::stop, 4, 2, 1);
  d1.has_output = true;
  d1.text = "B";
  d1.ids = {7, 8};
  d1.logprobs = {{-0.5, {{7, -0.5}}}, {-1.0, {{9, -0.25}}}};
  BOOST_TEST(b.feed(d1).empty());
  BOOST_TEST(!b.complete());
  auto d0 = done(wire::finish_reason::length, 4, 3, 0);
  d0.has_output = true;
  d0.text = "A";
  auto j = json::parse(b.feed(d0));
  BOOST_TEST(b.complete());
  BOOST_TEST(j["object"] == "text_completion");
  BOOST_TEST(j["choices"][0]["text"] == "A");
  BOOST_TEST(j["choices"][0]["finish_reason"] == "length");
  BOOST_TEST(j["choices"][1]["text"] == "B");
  BOOST_TEST(j["usage"]["prompt_tokens"] == 4);  // the prompt counts once
  BOOST_TEST(j["usage"]["completion_tokens"] == 5);
  const auto& lp = j["choices"][1]["logprobs"];
  BOOST_TEST(lp["tokens"][0] == "\xef\xbf\xbd");  // half a character -> U+FFFD
  BOOST_TEST(lp["tokens"][1] == "t8");
  BOOST_TEST(lp["token_logprobs"][1] == -1.0);
  BOOST_TEST(lp["top_logprobs"][1]["t9"] == -0.25);
  BOOST_TEST(lp["text_offset"][1] == 2);
}

// vLLM's truncate_prompt_tokens reaches the protocol from completions, chat and embeddings; not
// beside echo (which returns the prompt as sent), nor for rerank. include_stop_str_in_output too.
BOOST_AUTO_TEST_CASE(truncate_prompt_tokens_passes_through) {
  auto p = completion(R"({"prompt": [1, 2, 3], "truncate_prompt_tokens": 2})");
  BOOST_TEST_REQUIRE(p.ok(), p.error.message);
  BOOST_TEST(p.req->truncate_prompt_tokens.value() == 2);
  auto c = chat(R"({"messages": [{"role": "user", "content": "q"}], "truncate_prompt_tokens": -1})");
  BOOST_TEST_REQUIRE(c.ok(), c.error.message);
  BOOST_TEST(c.req->truncate_prompt_tokens.value() == -1);
  auto e = oa::parse_request(oa::endpoint::embeddings, R"({"input": "a", "truncate_prompt_tokens": 8})", models, "e");
  BOOST_TEST_REQUIRE(e.ok(), e.error.message);
  BOOST_TEST(e.req->truncate_prompt_tokens.value() == 8);
  auto echo = completion(R"({"prompt": [1, 2, 3], "truncate_prompt_tokens": 2, "echo": true})");
  BOOST_TEST(!echo.ok());
  BOOST_TEST(echo.error.param == "echo");
  auto inc = completion(R"({"prompt": "a", "stop": ["x"], "include_stop_str_in_output": true})");
  BOOST_TEST_REQUIRE(inc.ok(), inc.error.message);
  BOOST_TEST(inc.req->include_stop_str_in_output);
  BOOST_TEST(inc.req->skip_special_tokens);  // vLLM's default
  auto keep = chat(R"({"messages": [{"role": "user", "content": "q"}], "skip_special_tokens": false})");
  BOOST_TEST_REQUIRE(keep.ok(), keep.error.message);
  BOOST_TEST(!keep.req->skip_special_tokens);
  BOOST_TEST(completion(R"({"prompt": "a", "skip_special_tokens": 0})").error.code == "wrong_type");
  auto zero = completion(R"({"prompt": [1, 2, 3], "truncate_prompt_tokens": 0})");
  BOOST_TEST(zero.error.code == "invalid_value");
  auto rerank = oa::parse_request(oa::endpoint::rerank, R"({"query": "q", "documents": ["a"], "truncate_prompt_tokens": 8})",
                                  models, "r");
  BOOST_TEST(rerank.error.code == "unknown_field");
}

// vLLM's cache_salt reaches the protocol from completions and chat; not from embeddings (whose
// prompts are not cached across requests); an empty or non-string salt is refused naming it.
// chat_template_kwargs: enable_thinking becomes the protocol's field, the others template
// variables; a name the request's own fields set is refused naming it.
BOOST_AUTO_TEST_CASE(chat_template_kwargs_pass_to_the_template) {
  auto c = chat(R"({"messages": [{"role": "user", "content": "q"}],
                    "chat_template_kwargs": {"enable_thinking": false, "style": {"tone": "dry"}}})");
  BOOST_TEST_REQUIRE(c.ok(), c.error.message);
  BOOST_TEST((c.req->enable_thinking == std::optional<bool>(false)));
  BOOST_TEST(c.req->template_kwargs_json == R"({"style":{"tone":"dry"}})");
  auto only = chat(R"({"messages": [{"role": "user", "content": "q"}], "chat_template_kwargs": {"enable_thinking": true}})");
  BOOST_TEST_REQUIRE(only.ok(), only.error.message);
  BOOST_TEST(only.req->template_kwargs_json.empty());
  auto bad = chat(R"({"messages": [{"role": "user", "content": "q"}], "chat_template_kwargs": {"tools": []}})");
  BOOST_TEST(bad.error.param == "chat_template_kwargs.tools");
  // vLLM's chat_template: passed on, the server decides whether it renders it.
  auto own = chat(R"({"messages": [{"role": "user", "content": "q"}], "chat_template": "{{ messages }}"})");
  BOOST_TEST_REQUIRE(own.ok(), own.error.message);
  BOOST_TEST(own.req->chat_template == "{{ messages }}");
  BOOST_TEST(completion(R"({"prompt": "q", "chat_template": "x"})").error.code == "unknown_field");
}

// model.reasoning_effort_budgets: an effort the server maps is a thinking budget (the request's own
// budget wins); "none" still turns thinking off; an effort it does not map changes nothing.
BOOST_AUTO_TEST_CASE(reasoning_effort_maps_to_a_thinking_budget) {
  auto mapped = models;
  mapped.effort_budgets = {{"low", 1024}, {"high", -1}};
  auto p = [&](const std::string& extra) {
    return oa::parse_request(oa::endpoint::chat, R"({"messages": [{"role": "user", "content": "q"}])" + extra + "}",
                             mapped, "c");
  };
  auto low = p(R"(, "reasoning_effort": "low")");
  BOOST_TEST_REQUIRE(low.ok(), low.error.message);
  BOOST_TEST(low.req->thinking_token_budget.value_or(-2) == 1024);
  BOOST_TEST(p(R"(, "reasoning_effort": "high")").req->thinking_token_budget.value_or(-2) == -1);
  BOOST_TEST(!p(R"(, "reasoning_effort": "medium")").req->thinking_token_budget.has_value());
  BOOST_TEST(p(R"(, "reasoning_effort": "low", "thinking_token_budget": 7)").req->thinking_token_budget.value_or(-2) == 7);
  auto none = p(R"(, "reasoning_effort": "none")");
  BOOST_TEST(!none.req->thinking_token_budget.has_value());
  BOOST_TEST((none.req->enable_thinking == std::optional<bool>(false)));
  BOOST_TEST(!chat(R"({"messages": [{"role": "user", "content": "q"}], "reasoning_effort": "low"})").req->thinking_token_budget.has_value());
  // The Responses API's reasoning.effort is chat's reasoning_effort.
  auto r = oa::parse_responses(R"({"input": "q", "reasoning": {"effort": "low"}})", mapped, "resp_0");
  BOOST_TEST_REQUIRE(r.ok(), r.chat.error.message);
  BOOST_TEST(r.chat.req->thinking_token_budget.value_or(-2) == 1024);
}

// vLLM's thinking_token_budget reaches the protocol from chat and completions; -1 is no budget,
// below it or not an integer is refused naming it.
BOOST_AUTO_TEST_CASE(thinking_token_budget_passes_through) {
  auto c = chat(R"({"messages": [{"role": "user", "content": "q"}], "thinking_token_budget": 64})");
  BOOST_TEST_REQUIRE(c.ok(), c.error.message);
  BOOST_TEST(c.req->thinking_token_budget.value_or(-2) == 64);
  auto p = completion(R"({"prompt": "a", "thinking_token_budget": -1})");
  BOOST_TEST_REQUIRE(p.ok(), p.error.message);
  BOOST_TEST(p.req->thinking_token_budget.value_or(-2) == -1);
  auto low = completion(R"({"prompt": "a", "thinking_token_budget": -2})");
  BOOST_TEST(low.error.code == "invalid_value");
  BOOST_TEST(low.error.message.find("thinking_token_budget") != std::string::npos);
  BOOST_TEST(completion(R"({"prompt": "a", "thinking_token_budget": "many"})").error.code == "wrong_type");
}

BOOST_AUTO_TEST_CASE(cache_salt_passes_through) {
  auto p = completion(R"({"prompt": "a", "cache_salt": "tenant-a"})");
  BOOST_TEST_REQUIRE(p.ok(), p.error.message);
  BOOST_TEST(p.req->cache_salt == "tenant-a");
  auto c = chat(R"({"messages": [{"role": "user", "content": "q"}], "cache_salt": "s"})");
  BOOST_TEST_REQUIRE(c.ok(), c.error.message);
  BOOST_TEST(c.req->cache_salt == "s");
  BOOST_TEST(chat(R"({"messages": [{"role": "user", "content": "q"}]})").req->cache_salt.empty());
  auto empty = completion(R"({"prompt": "a", "cache_salt": ""})");
  BOOST_TEST(empty.error.code == "invalid_value");
  BOOST_TEST(empty.error.message.find("cache_salt") != std::string::npos);
  BOOST_TEST(completion(R"({"prompt": "a", "cache_salt": 5})").error.code == "wrong_type");
  auto e = oa::parse_request(oa::endpoint::embeddings, R"({"input": "a", "cache_salt": "s"})", models, "e");
  BOOST_TEST(e.error.code == "unknown_field");
}

BOOST_AUTO_TEST_CASE(echo_scores_the_prompt) {
  auto p = completion(R"({"prompt": [3, 4, 5], "echo": true, "logprobs": 1, "max_tokens": 0})");
  BOOST_TEST_REQUIRE(p.ok(), p.error.message);
  BOOST_TEST(p.echo);
  BOOST_TEST(p.prompt_only);
  BOOST_TEST(*p.req->max_tokens == 1);  // one token is generated and left out
  BOOST_TEST(*p.req->prompt_logprobs == 1);
  oa::response_builder b(oa::endpoint::completion, p, 5, token_text);
  b.set_echo_prompt(0, "t3t4t5", {3, 4, 5});
  auto d = done(wire::finish_reason::length, 3, 1);
  d.has_output = true;
  d.text = "t9";
  d.ids = {9};
  d.logprobs = {{-2.0, {{9, -2.0}}}};
  d.prompt_logprobs = std::vector<wire::logprob_info>{{-1.5, {{4, -1.5}}}, {-0.5, {{5, -0.5}}}};
  auto j = json::parse(b.feed(d));
  const auto& c = j["choices"][0];
  BOOST_TEST(c["text"] == "t3t4t5");
  BOOST_TEST((c["logprobs"]["tokens"] == json::array({"t3", "t4", "t5"})));
  BOOST_TEST(c["logprobs"]["token_logprobs"][0].is_null());
  BOOST_TEST(c["logprobs"]["token_logprobs"][1] == -1.5);
  BOOST_TEST(c["logprobs"]["token_logprobs"][2] == -0.5);
  BOOST_TEST(c["logprobs"]["top_logprobs"][0].is_null());
  BOOST_TEST(c["logprobs"]["top_logprobs"][2]["t5"] == -0.5);
  BOOST_TEST((c["logprobs"]["text_offset"] == json::array({0, 2, 4})));
  BOOST_TEST(j["usage"]["completion_tokens"] == 0);

  // With a completion the echo comes first, then the completion's tokens.
  auto q = completion(R"({"prompt": [3, 4], "echo": true, "logprobs": 0, "max_tokens": 1})");
  BOOST_TEST_REQUIRE(q.ok(), q.error.message);
  BOOST_TEST(!q.prompt_only);
  oa::response_builder e(oa::endpoint::completion, q, 5, token_text);
  e.set_echo_prompt(0, "t3t4", {3, 4});
  d.prompt_logprobs = std::vector<wire::logprob_info>{{-1.5, {}}};
  auto k = json::parse(e.feed(d));
  BOOST_TEST(k["choices"][0]["text"] == "t3t4t9");
  BOOST_TEST((k["choices"][0]["logprobs"]["tokens"] == json::array({"t3", "t4", "t9"})));
  BOOST_TEST(k["choices"][0]["logprobs"]["token_logprobs"][2] == -2.0);
  BOOST_TEST(k["usage"]["completion_tokens"] == 1);

  auto s = completion(R"({"prompt": "x", "echo": true, "stream": true})");
  BOOST_TEST(!s.ok());
  BOOST_TEST(s.error.param == "echo");
  auto z = completion(R"({"prompt": "x", "max_tokens": 0})");  // without echo, 0 tokens is an error still
  BOOST_TEST(!z.ok());
  BOOST_TEST(z.error.code == "invalid_value");
}

// vLLM's prompt_logprobs: each prompt token's logprob, rank and decoded token first, then the
// most likely tokens there (ranks 1, 2, ...), null for the first token; a completion's choice
// carries them, a chat body at its top; refused streamed, as -1, and beside echo's logprobs.
BOOST_AUTO_TEST_CASE(prompt_logprobs_as_vllm_gives_them) {
  auto p = completion(R"({"prompt": [3, 7, 9], "prompt_logprobs": 2, "max_tokens": 1})");
  BOOST_TEST_REQUIRE(p.ok(), p.error.message);
  BOOST_TEST(p.prompt_logprobs);
  BOOST_TEST(*p.req->prompt_logprobs == 2);
  oa::response_builder b(oa::endpoint::completion, p, 5, token_text);
  auto d = done(wire::finish_reason::length, 3, 1);
  d.has_output = true;
  d.text = "t9";
  d.ids = {9};
  d.prompt_logprobs = std::vector<wire::logprob_info>{{-1.5, {{5, -0.25}, {7, -1.5}}, 7, 2}, {-3.0, {{5, -0.1}, {6, -2.5}}, 9, 40}};
  const std::string raw = b.feed(d);
  auto j = json::parse(raw);
  const auto& pl = j["choices"][0]["prompt_logprobs"];
  BOOST_TEST_REQUIRE(pl.size() == 3u);
  BOOST_TEST(pl[0].is_null());
  const json first = json::parse(R"({"7": {"logprob": -1.5, "rank": 2, "decoded_token": "\ufffd"},
                                      "5": {"logprob": -0.25, "rank": 1, "decoded_token": "t5"}})");
  BOOST_TEST(pl[1] == first, pl[1].dump());
  BOOST_TEST(raw.find(R"("7":{"logprob")") < raw.find(R"("5":{"logprob")"));  // the prompt's token first, as vLLM's
  BOOST_TEST(pl[2].size() == 3u);
  BOOST_TEST(pl[2]["9"]["rank"] == 40);
  BOOST_TEST(pl[2]["6"]["rank"] == 2);
  BOOST_TEST(j["choices"][0]["text"] == "t9");

  auto c = chat(R"({"messages": [{"role": "user", "content": "hi"}], "prompt_logprobs": 0})");
  BOOST_TEST_REQUIRE(c.ok(), c.error.message);
  oa::response_builder cb(oa::endpoint::chat, c, 5, token_text);
  d.prompt_logprobs = std::vector<wire::logprob_info>{{-0.75, {}, 3, 1}};
  j = json::parse(cb.feed(d));
  BOOST_TEST(!j["choices"][0].contains("prompt_logprobs"));
  BOOST_TEST(j["prompt_logprobs"] == json::parse(R"([null, {"3": {"logprob": -0.75, "rank": 1, "decoded_token": "t3"}}])"));
  // Without it, no such field.
  j = json::parse(oa::response_builder(oa::endpoint::completion, completion(R"({"prompt": [1]})"), 5, token_text).feed(d));
  BOOST_TEST(!j["choices"][0].contains("prompt_logprobs"));

  for (const std::string bad : {R"({"prompt": [1], "prompt_logprobs": 2, "stream": true})",
                                R"({"prompt": [1], "prompt_logprobs": -1})", R"({"prompt": [1], "prompt_logprobs": 21})",
                                R"({"prompt": [1], "prompt_logprobs": "2"})",
                                R"({"prompt": [1], "prompt_logprobs": 2, "echo": true, "logprobs": 1})"}) {
    auto r = completion(bad);
    BOOST_TEST(!r.ok(), bad);
    // (a range the protocol checks names the field in the message only)
    BOOST_TEST((r.error.param == "prompt_logprobs" || r.error.message.find("'prompt_logprobs'") != std::string::npos),
               bad << ": " << r.error.message);
  }
}

// vLLM's return_token_ids: the prompt's ids (a completion's choice, a chat body's top) and each
// choice's generated ids; streamed, the prompt's on the first chunk and each chunk its token's,
// also while a tool call's text is held back.
BOOST_AUTO_TEST_CASE(return_token_ids_as_vllm_gives_them) {
  auto p = completion(R"({"prompt": [3, 7, 9], "return_token_ids": true, "max_tokens": 2})");
  BOOST_TEST_REQUIRE(p.ok(), p.error.message);
  BOOST_TEST(p.return_token_ids);
  BOOST_TEST(p.req->return_prompt_ids);
  oa::response_builder b(oa::endpoint::completion, p, 5, token_text);
  auto d = done(wire::finish_reason::length, 3, 2);
  d.has_output = true;
  d.text = "t5t6";
  d.ids = {5, 6};
  d.prompt_ids = std::vector<int32_t>{3, 7, 9};
  auto j = json::parse(b.feed(d));
  BOOST_TEST(j["choices"][0]["prompt_token_ids"] == json::parse("[3, 7, 9]"));
  BOOST_TEST(j["choices"][0]["token_ids"] == json::parse("[5, 6]"));
  BOOST_TEST(!j.contains("prompt_token_ids"));

  auto c = chat(R"({"messages": [{"role": "user", "content": "hi"}], "return_token_ids": true, "stream": true,
                    "tools": [{"type": "function", "function": {"name": "f"}}]})");
  BOOST_TEST_REQUIRE(c.ok(), c.error.message);
  oa::response_builder s(oa::endpoint::chat, c, 5, token_text);
  auto first = tok("Hi", 4);
  first.prompt_ids = std::vector<int32_t>{1, 2};
  std::string out = s.feed(first) + s.feed(tok(" <tool_call>", 8)) + s.feed(tok("{", 9));
  const auto evs = sse_events(out);
  BOOST_TEST_REQUIRE(evs.size() == 3u);  // one chunk a token, the held-back ones too
  BOOST_TEST(evs[0]["prompt_token_ids"] == json::parse("[1, 2]"));
  BOOST_TEST(!evs[1].contains("prompt_token_ids"));
  std::vector<int32_t> ids;
  for (const auto& e : evs)
    for (const auto& id : e["choices"][0]["token_ids"]) ids.push_back(id.get<int32_t>());
  BOOST_TEST(ids == (std::vector<int32_t>{4, 8, 9}), boost::test_tools::per_element());

  // Without it, none of these fields; not a boolean: refused naming it.
  j = json::parse(oa::response_builder(oa::endpoint::completion, completion(R"({"prompt": [1]})"), 5, token_text).feed(d));
  BOOST_TEST(!j["choices"][0].contains("token_ids"));
  auto bad = completion(R"({"prompt": [1], "return_token_ids": 1})");
  BOOST_TEST(bad.error.param == "return_token_ids");
}

// A batch of prompts (vLLM's list form): choice p * n + j is completion j of prompt p; each
// choice echoes its own prompt with the logprobs its prompt's first completion brought; usage
// counts each prompt's tokens once, whatever its n.
BOOST_AUTO_TEST_CASE(a_batch_of_prompts_gives_choices_by_prompt) {
  auto p = completion(R"({"prompt": [[3, 4], "t5t6t8"], "n": 2, "echo": true, "logprobs": 0, "max_tokens": 0})");
  BOOST_TEST_REQUIRE(p.ok(), p.error.message);
  BOOST_TEST_REQUIRE(p.req->prompts.size() == 2u);
  BOOST_TEST((p.req->prompts[0].kind == wire::prompt_kind::ids));
  BOOST_TEST(p.req->prompts[0].ids == (std::vector<int32_t>{3, 4}), boost::test_tools::per_element());
  BOOST_TEST(p.req->prompts[1].text == "t5t6t8");
  BOOST_TEST(p.req->n == 2);
  BOOST_TEST(p.req->sequences() == 4);
  oa::response_builder b(oa::endpoint::completion, p, 5, token_text);
  b.set_echo_prompt(0, "t3t4", {3, 4});
  b.set_echo_prompt(1, "t5t6t8", {5, 6, 8});
  // Completions end out of order; only the first of each prompt carries its prompt logprobs.
  for (int32_t i : {3, 1, 2, 0}) {
    auto d = done(wire::finish_reason::length, i < 2 ? 2 : 3, 1);
    d.index = i;
    d.has_output = true;
    d.text = "t9";
    d.ids = {9};
    d.logprobs = {{-2.0, {}}};
    d.usage.cached_prompt_tokens = i < 2 ? 0 : 2;
    if (i == 0) d.prompt_logprobs = std::vector<wire::logprob_info>{{-1.25, {}}};
    if (i == 2) d.prompt_logprobs = std::vector<wire::logprob_info>{{-0.5, {}}, {-0.75, {}}};
    auto out = b.feed(d);
    if (i != 0) BOOST_TEST(out.empty());
    if (i != 0) continue;
    auto j = json::parse(out);
    BOOST_TEST_REQUIRE(j["choices"].size() == 4u);
    for (size_t c = 0; c < 4; ++c) {
      const auto& ch = j["choices"][c];
      BOOST_TEST(ch["index"] == c);
      BOOST_TEST(ch["text"] == (c < 2 ? "t3t4" : "t5t6t8"));  // the generated token left out
      BOOST_TEST(ch["logprobs"]["tokens"].dump() == (c < 2 ? R"(["t3","t4"])" : R"(["t5","t6","t8"])"));
      BOOST_TEST(ch["logprobs"]["token_logprobs"][0].is_null());
      BOOST_TEST(ch["logprobs"]["token_logprobs"][1] == (c < 2 ? -1.25 : -0.5));
    }
    BOOST_TEST(j["choices"][3]["logprobs"]["token_logprobs"][2] == -0.75);
    BOOST_TEST(j["usage"]["prompt_tokens"] == 2 + 3);
    BOOST_TEST(j["usage"]["prompt_tokens_details"]["cached_tokens"] == 2);
    BOOST_TEST(j["usage"]["completion_tokens"] == 0);
  }
  // A list of one prompt is that prompt, not a batch.
  auto one = completion(R"({"prompt": ["t5"]})");
  BOOST_TEST_REQUIRE(one.ok(), one.error.message);
  BOOST_TEST(one.req->prompts.empty());
  BOOST_TEST(one.req->prompt == "t5");
}

BOOST_AUTO_TEST_CASE(chat_logprobs_carry_bytes) {
  auto p = chat(R"({"messages": [{"role": "user", "content": "q"}], "stream": true, "logprobs": true, "top_logprobs": 1})");
  BOOST_TEST_REQUIRE(p.ok());
  oa::response_builder b(oa::endpoint::chat, p, 5, token_text);
  auto t = tok("", 7);
  t.logprobs = wire::logprob_info{-0.1, {{7, -0.1}}, std::nullopt, std::nullopt};
  auto ev = sse_events(b.feed(t));
  BOOST_TEST_REQUIRE(ev.size() == 1u);
  const auto& c = ev[0]["choices"][0]["logprobs"]["content"][0];
  BOOST_TEST(c["logprob"] == -0.1);
  BOOST_TEST((c["bytes"] == json::array({0xe4, 0xbd})));
  BOOST_TEST(c["top_logprobs"][0]["logprob"] == -0.1);
}

// vLLM's chat echo: an assistant prefill (the final message) comes back ahead of the answer, whole
// or on the first chunk; after a user message there is nothing to echo; not a boolean: refused.
BOOST_AUTO_TEST_CASE(chat_echo_returns_the_prefill_ahead_of_the_answer) {
  const std::string prefill = R"({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "Sure, "}],
      "continue_final_message": true, "add_generation_prompt": false, "echo": true)";
  auto p = chat(prefill + "}");
  BOOST_TEST_REQUIRE(p.ok(), p.error.message);
  BOOST_TEST(p.chat_echo == "Sure, ");
  oa::response_builder whole(oa::endpoint::chat, p, 5, token_text);
  auto d = done(wire::finish_reason::stop, 3, 1);
  d.has_output = true;
  d.text = "here";
  whole.feed(tok("here", 7));
  const auto j = json::parse(whole.feed(d));
  BOOST_TEST(j["choices"][0]["message"]["content"] == "Sure, here");

  auto ps = chat(prefill + R"(, "stream": true})");
  BOOST_TEST_REQUIRE(ps.ok(), ps.error.message);
  oa::response_builder streamed(oa::endpoint::chat, ps, 5, token_text);
  std::string out = streamed.feed(tok("he", 7));
  out += streamed.feed(tok("re", 8));
  auto ev = sse_events(out);
  BOOST_TEST_REQUIRE(ev.size() == 2u);
  BOOST_TEST(ev[0]["choices"][0]["delta"]["role"] == "assistant");
  BOOST_TEST(ev[0]["choices"][0]["delta"]["content"] == "Sure, he");
  BOOST_TEST(ev[1]["choices"][0]["delta"]["content"] == "re");

  auto user_last = chat(R"({"messages": [{"role": "user", "content": "q"}], "echo": true})");
  BOOST_TEST_REQUIRE(user_last.ok(), user_last.error.message);
  BOOST_TEST(user_last.chat_echo.empty());
  BOOST_TEST(chat(R"({"messages": [{"role": "user", "content": "q"}], "echo": 1})").error.code == "wrong_type");
}

// vLLM's return_tokens_as_token_ids: every token a logprob names is "token_id:ID" (its bytes those
// of that text), in chat and completions; a non-boolean is refused naming it.
BOOST_AUTO_TEST_CASE(tokens_as_token_ids_in_logprobs) {
  auto p = chat(R"({"messages": [{"role": "user", "content": "q"}], "stream": true, "logprobs": true,
                    "top_logprobs": 1, "return_tokens_as_token_ids": true})");
  BOOST_TEST_REQUIRE(p.ok(), p.error.message);
  oa::response_builder b(oa::endpoint::chat, p, 5, token_text);
  auto t = tok("", 7);
  t.logprobs = wire::logprob_info{-0.1, {{9, -0.5}}, std::nullopt, std::nullopt};
  auto ev = sse_events(b.feed(t));
  BOOST_TEST_REQUIRE(ev.size() == 1u);
  const auto& c = ev[0]["choices"][0]["logprobs"]["content"][0];
  BOOST_TEST(c["token"] == "token_id:7");
  BOOST_TEST((c["bytes"] == json::array({'t', 'o', 'k', 'e', 'n', '_', 'i', 'd', ':', '7'})));
  BOOST_TEST(c["top_logprobs"][0]["token"] == "token_id:9");
  auto q = completion(R"({"prompt": "a", "logprobs": 1, "return_tokens_as_token_ids": true})");
  BOOST_TEST_REQUIRE(q.ok(), q.error.message);
  oa::response_builder cb(oa::endpoint::completion, q, 5, token_text);
  auto d = done(wire::finish_reason::stop, 1, 1);
  d.has_output = true;
  d.text = "x";
  d.ids = {8};
  d.logprobs = {{-1.0, {{8, -1.0}}}};
  const auto j = json::parse(cb.feed(d));
  BOOST_TEST(j["choices"][0]["logprobs"]["tokens"][0] == "token_id:8");
  BOOST_TEST(j["choices"][0]["logprobs"]["top_logprobs"][0]["token_id:8"] == -1.0);
  BOOST_TEST(completion(R"({"prompt": "a", "return_tokens_as_token_ids": 1})").error.code == "wrong_type");
}

BOOST_AUTO_TEST_CASE(models_list) {
  auto j = json::parse(oa::models_body(models, 3));
  BOOST_TEST(j["object"] == "list");
  BOOST_TEST_REQUIRE(j["data"].size() == 2u);
  BOOST_TEST(j["data"][0]["id"] == "qwen3");
  BOOST_TEST(j["data"][0]["max_model_len"] == 4096);
  BOOST_TEST(j["data"][1]["id"] == "sql-lora");
  BOOST_TEST(j["data"][1]["parent"] == "qwen3");

  // --served-model-name qwen3 claude-haiku: the alias is listed and answers as the model does.
  auto aliased = models;
  aliased.aliases = {"claude-haiku"};
  j = json::parse(oa::models_body(aliased, 3));
  BOOST_TEST_REQUIRE(j["data"].size() == 3u);
  BOOST_TEST(j["data"][1]["id"] == "claude-haiku");
  BOOST_TEST(j["data"][1]["parent"] == nullptr);
  auto p = oa::parse_request(oa::endpoint::chat, R"({"model": "claude-haiku", "messages": [{"role": "user", "content": "q"}]})",
                             aliased, "chatcmpl-1");
  BOOST_TEST_REQUIRE(p.ok(), p.error.message);
  BOOST_TEST(p.req->adapter.empty());
  BOOST_TEST(p.model == "qwen3");  // answers carry the first name, as vLLM's
  p = oa::parse_request(oa::endpoint::chat, R"({"model": "claude-haiku", "messages": [{"role": "user", "content": "q"}]})",
                        models, "chatcmpl-2");
  BOOST_TEST(p.error.status == 404);

  // GET /v1/models/{name}: the listed object of any served name.
  for (const char* name : {"qwen3", "claude-haiku", "sql-lora"}) {
    auto one = oa::model_body(aliased, name, 3);
    BOOST_TEST_REQUIRE(one.has_value(), name);
    BOOST_TEST(json::parse(*one)["id"] == name);
  }
  BOOST_TEST(json::parse(*oa::model_body(aliased, "sql-lora", 3))["parent"] == "qwen3");
  BOOST_TEST(!oa::model_body(aliased, "gpt-4", 3));
  BOOST_TEST(!oa::model_body(aliased, "", 3));
}

BOOST_AUTO_TEST_SUITE_END()
