// OpenAI's Responses API (POST /v1/responses): input items into chat turns, the request's fields
// into the generate's, refusals naming the Responses API's own fields, and a generate's events
// into the response object and its typed server-sent events.
#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>
#include <tuple>

#include "tests/runtime/wire/generate_events.hpp"
#include "tests/runtime/wire/typed_sse.hpp"

#include "runtime/wire/openai_responses.hpp"

namespace oa = troupe::wire::openai;
namespace wire = troupe::wire;
using json = nlohmann::json;
using troupe::test::done;
using troupe::test::tok;

namespace {

const oa::served_models models{"qwen3", {"sql-lora"}, 4096};
constexpr int32_t think_end = 4;  // the test's </think>

oa::parsed_responses parse(const std::string& body) { return oa::parse_responses(body, models, "resp_00ab"); }

oa::responses_builder builder(const oa::parsed_responses& p) {
  return oa::responses_builder(p, 1700000000, [](int32_t id) { return "t" + std::to_string(id); }, think_end);
}

std::vector<json> events(const std::string& s) { return troupe::test::typed_events(s); }



// A thinking answer: <think>(1) "hm"(2) "m"(3) </think>(4) "Hi"(5) " there"(6).
std::vector<wire::token_event> thinking_answer() {
  return {tok(1, ""), tok(2, "", "hm"), tok(3, "", "m"), tok(4, ""), tok(5, "Hi"), tok(6, " there")};
}

// The same output whole, as a non-streamed generate's done carries it.
wire::done_event thinking_answer_done() {
  auto d = done(wire::finish_reason::stop);
  d.has_output = true;
  d.text = "Hi there";
  d.reasoning = "hmm";
  for (const auto& t : thinking_answer()) {
    d.ids.push_back(t.ids[0]);
    d.logprobs.push_back(*t.logprobs);
  }
  return d;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(openai_responses)

BOOST_AUTO_TEST_CASE(input_items_become_chat_turns) {
  auto p = parse(R"({"model": "qwen3", "instructions": "Be brief.", "input": [
      {"role": "developer", "content": "Use tools."},
      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather in "},
                                                      {"type": "input_text", "text": "Paris?"}]},
      {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "Call it."}]},
      {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Checking.", "annotations": []}]},
      {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{\"city\": \"Paris\"}"},
      {"type": "function_call", "call_id": "c2", "name": "time", "arguments": "{}"},
      {"type": "function_call_output", "call_id": "c1", "output": "20 C"},
      {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "noon"}]},
      {"role": "user", "content": "Thanks"}]})");
  BOOST_TEST_REQUIRE(p.ok(), p.chat.error.message);
  const auto& m = p.chat.req->messages;
  BOOST_TEST_REQUIRE(m.size() == 7u);
  BOOST_TEST(m[0].role == "system");
  BOOST_TEST(m[0].content == "Be brief.");
  BOOST_TEST(m[1].role == "system");  // developer
  BOOST_TEST(m[2].content == "Weather in \nParis?");  // parts joined by "\n", as vLLM joins them
  BOOST_TEST(m[3].role == "assistant");
  BOOST_TEST(m[3].content == "Checking.");
  BOOST_TEST(m[3].reasoning_content == "Call it.");
  const auto calls = json::parse(m[3].tool_calls_json);
  BOOST_TEST_REQUIRE(calls.size() == 2u);
  BOOST_TEST(calls[0]["function"]["name"] == "weather");
  BOOST_TEST(calls[0]["function"]["arguments"] == "{\"city\": \"Paris\"}");
  BOOST_TEST(calls[1]["function"]["name"] == "time");
  BOOST_TEST(m[4].role == "tool");
  BOOST_TEST(m[4].content == "20 C");
  BOOST_TEST(m[5].content == "noon");
  BOOST_TEST(m[6].role == "user");
  BOOST_TEST(p.chat.req->separate_reasoning);

  // A text input is one user turn; a call with no assistant text before it opens its own turn.
  p = parse(R"({"input": "Hello"})");
  BOOST_TEST_REQUIRE(p.ok());
  BOOST_TEST_REQUIRE(p.chat.req->messages.size() == 1u);
  BOOST_TEST(p.chat.req->messages[0].role == "user");
  BOOST_TEST(p.chat.req->messages[0].content == "Hello");
  p = parse(R"({"input": [{"role": "user", "content": "q"}, {"type": "function_call", "call_id": "c", "name": "f",
      "arguments": "{}"}, {"type": "function_call_output", "call_id": "c", "output": "ok"}]})");
  BOOST_TEST_REQUIRE(p.ok(), p.chat.error.message);
  BOOST_TEST_REQUIRE(p.chat.req->messages.size() == 3u);
  BOOST_TEST(p.chat.req->messages[1].role == "assistant");
  BOOST_TEST(p.chat.req->messages[1].content == "");
  BOOST_TEST(!p.chat.req->messages[1].tool_calls_json.empty());
}

BOOST_AUTO_TEST_CASE(fields_map_onto_the_generate) {
  auto p = parse(R"({"input": "q", "max_output_tokens": 50, "temperature": 0.3, "top_p": 0.9, "top_k": 5,
      "user": "team-a", "stream": true, "reasoning": {"effort": "none"},
      "tools": [{"type": "function", "name": "f", "description": "d", "parameters": {"type": "object"}, "strict": true}],
      "text": {"format": {"type": "json_schema", "name": "a", "schema": {"type": "object"}, "strict": true}},
      "include": ["message.output_text.logprobs", "reasoning.encrypted_content"], "top_logprobs": 3,
      "metadata": {"k": "v"}, "store": false, "prompt_cache_key": "c", "service_tier": "auto",
      "stream_options": {"include_obfuscation": false}, "truncation": "auto", "background": false,
      "max_tool_calls": 3, "cache_salt": "tenant-a", "thinking_token_budget": 256})");
  BOOST_TEST_REQUIRE(p.ok(), p.chat.error.message);
  const auto& r = *p.chat.req;
  BOOST_TEST(r.cache_salt == "tenant-a");
  BOOST_TEST(r.truncate_messages);
  BOOST_TEST(r.thinking_token_budget.value_or(-1) == 256);
  BOOST_TEST(r.max_tokens.value_or(0) == 50);
  BOOST_TEST(r.sampling.temperature.value_or(-1) == 0.3);
  BOOST_TEST(r.sampling.top_k.value_or(0) == 5);
  BOOST_TEST(r.tenant == "team-a");
  BOOST_TEST(r.stream);
  BOOST_TEST((r.enable_thinking == std::optional<bool>(false)));  // effort "none": Qwen3 does not think
  const auto tools = json::parse(r.tools_json);
  BOOST_TEST(tools[0]["function"]["name"] == "f");
  BOOST_TEST(tools[0]["function"]["description"] == "d");
  BOOST_TEST((r.structured.k == wire::structured_output::kind::json_schema));
  BOOST_TEST(r.logprobs.value_or(-1) == 3);
  BOOST_TEST(p.logprobs);
  const auto echo = json::parse(p.echo_json);
  BOOST_TEST(echo["max_output_tokens"] == 50);
  BOOST_TEST(echo["metadata"]["k"] == "v");
  BOOST_TEST(echo["tools"][0]["name"] == "f");
  BOOST_TEST(echo["store"] == false);  // asked not to (and no store given here anyway)
  BOOST_TEST(echo["max_tool_calls"] == 3);
  BOOST_TEST(echo["truncation"] == "auto");

  // Without max_output_tokens an answer may run to the end of the context, as chat's does.
  p = parse(R"({"input": "q"})");
  BOOST_TEST(p.chat.req->max_tokens.value_or(0) == 4096);
  BOOST_TEST(!p.chat.req->truncate_messages);  // OpenAI's default: disabled
  BOOST_TEST(!p.chat.req->enable_thinking.has_value());
  // A LoRA adapter by name.
  p = parse(R"({"input": "q", "model": "sql-lora"})");
  BOOST_TEST_REQUIRE(p.ok());
  BOOST_TEST(p.chat.model == "sql-lora");
}

BOOST_AUTO_TEST_CASE(bad_requests_name_the_responses_field) {
  const std::string tools = R"("tools": [{"type": "function", "name": "f"}])";
  struct bad {
    std::string body;
    int status;
    std::string code, param;
  };
  const std::vector<bad> cases = {
      {R"({})", 400, "missing_field", "input"},
      {R"({"input": []})", 400, "invalid_value", "input"},
      {R"({"input": 5})", 400, "wrong_type", "input"},
      {R"({"input": [{"role": "robot", "content": "x"}]})", 400, "invalid_value", "input[0].role"},
      {R"({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "u"}]}]})", 400, "unsupported",
       "input[0].content[0].type"},
      {R"({"input": [{"role": "user", "content": "x", "colour": 1}]})", 400, "unknown_field", "input[0].colour"},
      {R"({"input": [{"type": "function_call", "name": "f", "arguments": "{}"}]})", 400, "missing_field", "input[0].call_id"},
      {R"({"input": [{"type": "item_reference", "id": "msg_1"}]})", 400, "unsupported", "input[0].type"},
      {R"({"input": [{"type": "web_search_call"}]})", 400, "unsupported", "input[0].type"},
      {R"({"input": "x", "tools": [{"type": "web_search"}]})", 400, "unsupported", "tools[0].type"},
      {R"({"input": "x", "tools": [{"type": "function"}]})", 400, "missing_field", "tools[0].name"},
      {R"({"input": "x", "tool_choice": {"type": "function", "name": "nope"}, )" + tools + "}", 400, "invalid_value",
       "tool_choice"},
      {R"({"input": "x", "tool_choice": {"type": "file_search"}, )" + tools + "}", 400, "unsupported", "tool_choice.type"},
      {R"({"input": "x", "previous_response_id": "resp_1"})", 404, "not_found", "previous_response_id"},
      {R"({"input": "x", "previous_response_id": 1})", 400, "wrong_type", "previous_response_id"},
      {R"({"input": "x", "store": "yes"})", 400, "wrong_type", "store"},
      {R"({"input": "x", "conversation": "conv_1"})", 404, "not_found", "conversation"},  // no store given
      {R"({"input": "x", "conversation": {"name": "c"}})", 400, "unknown_field", "conversation.name"},
      {R"({"input": "x", "conversation": 3})", 400, "wrong_type", "conversation"},
      {R"({"input": "x", "prompt": {"id": "p"}})", 400, "unsupported", "prompt"},
      {R"({"input": "x", "max_tool_calls": 0})", 400, "wrong_type", "max_tool_calls"},
      {R"({"input": "x", "background": true})", 400, "unsupported", "background"},
      {R"({"input": "x", "truncation": "middle"})", 400, "wrong_type", "truncation"},
      {R"({"input": "x", "max_output_tokens": 0})", 400, "invalid_value", "max_output_tokens"},
      {R"({"input": "x", "max_output_tokens": "ten"})", 400, "wrong_type", "max_output_tokens"},
      {R"({"input": "x", "temperature": -1})", 400, "invalid_value", "temperature"},
      {R"({"input": "x", "text": {"format": {"type": "xml"}}})", 400, "invalid_value", "text.format.type"},
      {R"({"input": "x", "text": {"format": {"type": "json_schema", "schema": {}}}})", 400, "missing_field",
       "text.format.name"},
      {R"({"input": "x", "top_logprobs": 2})", 400, "invalid_value", "top_logprobs"},
      {R"({"input": "x", "reasoning": {"effort": 3}})", 400, "wrong_type", "reasoning.effort"},
      {R"({"input": "x", "metadata": {"k": 1}})", 400, "wrong_type", "metadata.k"},
      {R"({"input": "x", "n": 2})", 400, "unknown_field", "n"},
      {R"({"input": "x", "frobnicate": 1})", 400, "unknown_field", "frobnicate"},
      {R"({"input": "x", "model": "other"})", 404, "model_not_found", "model"},
      {R"({"input": "x")", 400, "malformed", ""},
  };
  for (const auto& c : cases) {
    auto p = parse(c.body);
    BOOST_TEST_REQUIRE(!p.ok(), c.body);
    BOOST_TEST(p.chat.error.status == c.status, c.body);
    BOOST_TEST(p.chat.error.code == c.code, c.body << ": " << p.chat.error.code << " " << p.chat.error.message);
    // The field as `param`, or (the protocol decoder's refusals, which carry none) in the message.
    const auto& e = p.chat.error;
    BOOST_TEST((e.param == c.param || (e.param.empty() && e.message.find("'" + c.param + "'") != std::string::npos)),
               c.body << ": " << e.param << " " << e.message);
    BOOST_TEST(!p.chat.error.message.empty());
  }
  // The chat parser's words for a field the client named otherwise are the client's.
  auto p = parse(R"({"input": "x", "max_output_tokens": 99999999999})");
  BOOST_TEST_REQUIRE(!p.ok());
  BOOST_TEST(p.chat.error.message.find("max_output_tokens") != std::string::npos, p.chat.error.message);
  BOOST_TEST(p.chat.error.message.find("max_tokens") == std::string::npos, p.chat.error.message);
}

BOOST_AUTO_TEST_CASE(a_whole_response) {
  auto p = parse(R"({"input": "q", "instructions": "Be brief.", "include": ["message.output_text.logprobs"]})");
  BOOST_TEST_REQUIRE(p.ok());
  auto b = builder(p);
  const auto body = b.feed(thinking_answer_done());
  BOOST_TEST_REQUIRE(b.complete());
  BOOST_TEST(b.status() == 200);
  BOOST_TEST(!b.streaming());
  const auto j = json::parse(body);
  BOOST_TEST(j["id"] == "resp_00ab");
  BOOST_TEST(j["object"] == "response");
  BOOST_TEST(j["created_at"] == 1700000000);
  BOOST_TEST(j["status"] == "completed");
  BOOST_TEST(j["instructions"] == "Be brief.");
  BOOST_TEST(j["model"] == "qwen3");
  BOOST_TEST_REQUIRE(j["output"].size() == 2u);
  const auto& rs = j["output"][0];
  BOOST_TEST(rs["type"] == "reasoning");
  BOOST_TEST(rs["content"][0]["type"] == "reasoning_text");
  BOOST_TEST(rs["content"][0]["text"] == "hmm");
  const auto& msg = j["output"][1];
  BOOST_TEST(msg["type"] == "message");
  BOOST_TEST(msg["role"] == "assistant");
  BOOST_TEST(msg["status"] == "completed");
  BOOST_TEST(msg["content"][0]["type"] == "output_text");
  BOOST_TEST(msg["content"][0]["text"] == "Hi there");
  // Logprobs of the answer's tokens only, not of the thinking's.
  const auto& lps = msg["content"][0]["logprobs"];
  BOOST_TEST_REQUIRE(lps.size() == 2u);
  BOOST_TEST(lps[0]["token"] == "t5");
  BOOST_TEST(lps[0]["logprob"] == -2.5);
  BOOST_TEST(lps[0]["top_logprobs"][0]["token"] == "t5");
  BOOST_TEST(lps[1]["token"] == "t6");
  BOOST_TEST(rs["id"] != msg["id"]);
  const auto& u = j["usage"];
  BOOST_TEST(u["input_tokens"] == 9);
  BOOST_TEST(u["input_tokens_details"]["cached_tokens"] == 3);
  BOOST_TEST(u["output_tokens"] == 6);
  BOOST_TEST(u["output_tokens_details"]["reasoning_tokens"] == 4);  // <think> .. </think>
  BOOST_TEST(u["total_tokens"] == 15);
}

BOOST_AUTO_TEST_CASE(a_stream_carries_the_whole_responses_output) {
  auto p = parse(R"({"input": "q", "stream": true, "include": ["message.output_text.logprobs"]})");
  BOOST_TEST_REQUIRE(p.ok());
  auto b = builder(p);
  std::string s;
  for (const auto& t : thinking_answer()) s += b.feed(t);
  BOOST_TEST(!b.complete());
  s += b.feed(done(wire::finish_reason::stop));
  BOOST_TEST_REQUIRE(b.complete());
  BOOST_TEST(b.streaming());
  const auto ev = events(s);
  BOOST_TEST_REQUIRE(ev.size() > 4u);
  for (size_t i = 0; i < ev.size(); ++i) BOOST_TEST(ev[i]["sequence_number"] == i);
  BOOST_TEST(ev[0]["type"] == "response.created");
  BOOST_TEST(ev[0]["response"]["status"] == "in_progress");
  BOOST_TEST(ev[1]["type"] == "response.in_progress");
  BOOST_TEST(ev.back()["type"] == "response.completed");
  std::string reasoning, text;
  std::vector<std::string> order;
  for (const auto& e : ev) {
    order.push_back(e["type"]);
    if (e["type"] == "response.reasoning_text.delta") reasoning += e["delta"].get<std::string>();
    if (e["type"] == "response.output_text.delta") text += e["delta"].get<std::string>();
  }
  BOOST_TEST(reasoning == "hmm");
  BOOST_TEST(text == "Hi there");
  const std::vector<std::string> want = {
      "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
      "response.reasoning_text.delta", "response.reasoning_text.delta", "response.reasoning_text.done",
      "response.content_part.done", "response.output_item.done", "response.output_item.added",
      "response.content_part.added", "response.output_text.delta", "response.output_text.delta",
      "response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"};
  BOOST_TEST(order == want, boost::test_tools::per_element());

  // The final response is the one a whole (non-streamed) request gets.
  auto whole = parse(R"({"input": "q", "include": ["message.output_text.logprobs"]})");
  auto wb = builder(whole);
  const auto w = json::parse(wb.feed(thinking_answer_done()));
  BOOST_TEST(ev.back()["response"]["output"] == w["output"], ev.back()["response"]["output"].dump());
  BOOST_TEST(ev.back()["response"]["usage"] == w["usage"]);
  // Each item's done event carries the item as the final response has it.
  std::vector<json> items;
  for (const auto& e : ev)
    if (e["type"] == "response.output_item.done") items.push_back(e["item"]);
  BOOST_TEST(json(items) == w["output"]);
}

BOOST_AUTO_TEST_CASE(tool_calls_become_function_call_items) {
  const std::string req = R"({"input": "q", "tools": [{"type": "function", "name": "weather"}]})";
  auto p = parse(req.substr(0, req.size() - 1) + R"(, "stream": true})");
  BOOST_TEST_REQUIRE(p.ok(), p.chat.error.message);
  auto b = builder(p);
  std::string s = b.feed(tok(5, "Let me check.\n<tool"));
  s += b.feed(tok(6, "_call>\n{\"name\": \"weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"));
  auto d = done(wire::finish_reason::stop);
  d.tool_calls = {{"weather", "{\"city\": \"Paris\"}"}};
  s += b.feed(d);
  const auto ev = events(s);
  std::string text;
  for (const auto& e : ev)
    if (e["type"] == "response.output_text.delta") text += e["delta"].get<std::string>();
  BOOST_TEST(text == "Let me check.\n");  // never the call's block
  const auto& out = ev.back()["response"]["output"];
  BOOST_TEST_REQUIRE(out.size() == 2u, out.dump());
  BOOST_TEST(out[1]["type"] == "function_call");
  BOOST_TEST(out[1]["name"] == "weather");
  BOOST_TEST(out[1]["arguments"] == "{\"city\": \"Paris\"}");
  BOOST_TEST(out[1]["status"] == "completed");
  BOOST_TEST(out[1]["call_id"].get<std::string>().rfind("call_", 0) == 0);
  // The item was added with its call_id and name (its identity), the arguments following.
  for (const auto& e : ev)
    if (e["type"] == "response.output_item.added" && e["item"]["type"] == "function_call") {
      BOOST_TEST(e["item"]["call_id"] == out[1]["call_id"]);
      BOOST_TEST(e["item"]["name"] == "weather");
      BOOST_TEST(e["item"]["arguments"] == "");
    }
  BOOST_TEST(ev.back()["response"]["status"] == "completed");

  // Whole: the message holds the text before the call.
  auto wb = builder(parse(req));
  auto wd = d;
  wd.has_output = true;
  wd.text = "Let me check.\n<tool_call>\n{\"name\": \"weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
  const auto w = json::parse(wb.feed(wd));
  BOOST_TEST_REQUIRE(w["output"].size() == 2u);
  BOOST_TEST(w["output"][0]["content"][0]["text"] == "Let me check.");
  BOOST_TEST(w["output"][1]["arguments"] == "{\"city\": \"Paris\"}");
}

// With stream_tool_arguments, a call's item is added once its name is whole and its arguments
// stream as function_call_arguments.delta events, ending with the arguments the model wrote; a
// call shaped otherwise is added whole at the end.
BOOST_AUTO_TEST_CASE(streamed_call_arguments_come_piece_by_piece) {
  auto p = parse(R"({"input": "q", "stream": true, "tools": [{"type": "function", "name": "f"},
      {"type": "function", "name": "g"}]})");
  BOOST_TEST_REQUIRE(p.ok());
  p.chat.stream_tool_arguments = true;
  auto b = builder(p);
  const std::string args = R"({"path": "a.c", "text": "{ nested } \"quoted\""})";
  const std::string text = "Writing.\n<tool_call>\n{\"name\": \"f\", \"arguments\": " + args +
                           "}\n</tool_call>\n<tool_call>\n{\"arguments\": {}, \"name\": \"g\"}\n</tool_call>";
  std::string s;
  for (size_t i = 0; i < text.size(); i += 5) s += b.feed(tok(5, text.substr(i, 5)));
  auto d = done(wire::finish_reason::stop);
  d.tool_calls = {{"f", nlohmann::json::parse(args).dump()}, {"g", "{}"}};
  s += b.feed(d);
  const auto ev = events(s);
  std::string streamed, message;
  std::vector<std::string> order;
  for (const auto& e : ev) {
    if (e["type"] == "response.function_call_arguments.delta" && e.value("output_index", -1) == 1) streamed += e["delta"].get<std::string>();
    if (e["type"] == "response.output_text.delta") message += e["delta"].get<std::string>();
    if (e.value("output_index", -1) == 1) order.push_back(e["type"]);
  }
  BOOST_TEST(message == "Writing.\n");
  BOOST_TEST(streamed == args);
  BOOST_TEST_REQUIRE(order.size() > 3u);
  BOOST_TEST(order.front() == "response.output_item.added");
  BOOST_TEST(order[order.size() - 2] == "response.function_call_arguments.done");
  BOOST_TEST(order.back() == "response.output_item.done");
  const auto& out = ev.back()["response"]["output"];
  BOOST_TEST_REQUIRE(out.size() == 3u, out.dump());
  BOOST_TEST(out[1]["name"] == "f");
  BOOST_TEST(out[1]["arguments"] == args);
  BOOST_TEST(out[1]["status"] == "completed");
  BOOST_TEST(out[2]["name"] == "g");
  BOOST_TEST(out[2]["arguments"] == "{}");
  BOOST_TEST(out[1]["call_id"] != out[2]["call_id"]);
  // The item added first names the call it becomes (OpenAI's SDK checks the identity).
  for (const auto& e : ev)
    if (e["type"] == "response.output_item.added" && e.value("output_index", -1) == 1) {
      BOOST_TEST(e["item"]["call_id"] == out[1]["call_id"]);
      BOOST_TEST(e["item"]["name"] == "f");
    }
}

BOOST_AUTO_TEST_CASE(a_forced_call_is_the_whole_output) {
  auto p = parse(R"({"input": "q", "stream": true, "tool_choice": {"type": "function", "name": "unit"},
      "tools": [{"type": "function", "name": "unit", "parameters": {"type": "object"}}]})");
  BOOST_TEST_REQUIRE(p.ok(), p.chat.error.message);
  BOOST_TEST((p.chat.req->structured.k == wire::structured_output::kind::json_schema));  // the output held to the parameters' schema
  auto b = builder(p);
  std::string s = b.feed(tok(5, "{\"unit\": "));
  s += b.feed(tok(6, "\"c\"}"));
  s += b.feed(done(wire::finish_reason::stop));
  const auto ev = events(s);
  for (const auto& e : ev) BOOST_TEST(e["type"] != "response.output_text.delta");
  const auto& out = ev.back()["response"]["output"];
  BOOST_TEST_REQUIRE(out.size() == 1u, out.dump());
  BOOST_TEST(out[0]["type"] == "function_call");
  BOOST_TEST(out[0]["name"] == "unit");
  BOOST_TEST(out[0]["arguments"] == "{\"unit\": \"c\"}");
}

BOOST_AUTO_TEST_CASE(how_a_response_ends) {
  // Cut by max_output_tokens: incomplete, and so is the message; a stream still ends with
  // response.completed (as vLLM: OpenAI's SDK takes the final response from it).
  for (bool stream : {false, true}) {
    auto b = builder(parse(stream ? R"({"input": "q", "stream": true})" : R"({"input": "q"})"));
    std::string s = b.feed(tok(5, "Hi"));
    auto d = done(wire::finish_reason::length);
    if (!stream) {
      d.has_output = true;
      d.text = "Hi";
      d.ids = {5};
    }
    s += b.feed(d);
    const auto r = stream ? events(s).back()["response"] : json::parse(s);
    if (stream) BOOST_TEST(events(s).back()["type"] == "response.completed");
    BOOST_TEST(r["status"] == "incomplete");
    BOOST_TEST(r["incomplete_details"]["reason"] == "max_output_tokens");
    BOOST_TEST(r["output"][0]["status"] == "incomplete");
    BOOST_TEST(r["output"][0]["content"][0]["text"] == "Hi");
  }
  // An error before any output: the HTTP status and OpenAI's error body.
  auto b = builder(parse(R"({"input": "q", "stream": true})"));
  auto d = done(wire::finish_reason::error);
  d.error = wire::wire_error{wire::error_code::prompt_too_long, "prompt is 5000 tokens", {}};
  const auto body = b.feed(d);
  BOOST_TEST(b.complete());
  BOOST_TEST(b.status() == 400);
  BOOST_TEST(!b.streaming());
  BOOST_TEST(json::parse(body)["error"]["code"] == "prompt_too_long");
  // After output began: an error event, then the response as failed.
  auto m = builder(parse(R"({"input": "q", "stream": true})"));
  std::string s = m.feed(tok(5, "Hi"));
  d.error = wire::wire_error{wire::error_code::internal, "the executor failed", {}};
  s += m.feed(d);
  const auto ev = events(s);
  BOOST_TEST_REQUIRE(ev.size() >= 2u);
  BOOST_TEST(ev[ev.size() - 2]["type"] == "error");
  BOOST_TEST(ev[ev.size() - 2]["message"] == "the executor failed");
  BOOST_TEST(ev.back()["type"] == "response.failed");
  BOOST_TEST(ev.back()["response"]["status"] == "failed");
  BOOST_TEST(ev.back()["response"]["error"]["code"] == "internal");
  // An empty answer is still a message.
  auto e = builder(parse(R"({"input": "q"})"));
  auto ed = done(wire::finish_reason::stop);
  ed.has_output = true;
  const auto r = json::parse(e.feed(ed));
  BOOST_TEST_REQUIRE(r["output"].size() == 1u);
  BOOST_TEST(r["output"][0]["content"][0]["text"] == "");
  BOOST_TEST(r["usage"]["output_tokens_details"]["reasoning_tokens"] == 0);
}

BOOST_AUTO_TEST_SUITE_END()

// The store (OpenAI's `store: true`, the default): a response is kept with the conversation it
// answered and its output; previous_response_id puts that conversation (not its instructions) ahead
// of the new input, so the chat turns are those of the whole conversation sent at once.
BOOST_AUTO_TEST_SUITE(openai_responses_store)

BOOST_AUTO_TEST_CASE(previous_response_id_continues_the_stored_conversation) {
  oa::response_store store(1 << 20);
  auto first = oa::parse_responses(R"({"instructions": "Be brief.", "input": "Weather in Paris?",
      "tools": [{"type": "function", "name": "weather"}]})", models, "resp_1", &store);
  BOOST_TEST_REQUIRE(first.ok(), first.chat.error.message);
  BOOST_TEST(first.store);
  BOOST_TEST(json::parse(first.echo_json)["store"] == true);
  auto b = builder(first);
  std::string stored_response;
  b.set_on_final([&](const nlohmann::ordered_json& r) {
    oa::keep_response(store, "resp_1", *first.conversation, r);
    stored_response = *store.get("resp_1")->response;
  });
  auto d = done(wire::finish_reason::stop);
  d.has_output = true;
  d.reasoning = "Call it.";
  d.tool_calls = {{"weather", R"({"city": "Paris"})"}};
  const std::string body = b.feed(d);
  BOOST_TEST(body == stored_response);  // what GET answers is what the client got
  BOOST_TEST(store.size() == 1u);

  auto second = oa::parse_responses(R"({"previous_response_id": "resp_1", "input": [
      {"type": "function_call_output", "call_id": "call_00", "output": "20 C"}]})", models, "resp_2", &store);
  BOOST_TEST_REQUIRE(second.ok(), second.chat.error.message);
  const auto& m = second.chat.req->messages;
  BOOST_TEST_REQUIRE(m.size() == 3u);  // no system turn: instructions are not carried over
  BOOST_TEST(m[0].role == "user");
  BOOST_TEST(m[0].content == "Weather in Paris?");
  BOOST_TEST(m[1].role == "assistant");
  BOOST_TEST(m[1].reasoning_content == "Call it.");
  const auto calls = json::parse(m[1].tool_calls_json);
  BOOST_TEST_REQUIRE(calls.size() == 1u);
  BOOST_TEST(calls[0]["function"]["name"] == "weather");
  BOOST_TEST(m[2].role == "tool");
  BOOST_TEST(m[2].content == "20 C");
  BOOST_TEST(json::parse(second.echo_json)["previous_response_id"] == "resp_1");
  // Its conversation, kept in turn, is the first's plus its own input.
  BOOST_TEST(second.conversation->size() == first.conversation->size() + 2 + 1);

  // The same turns as the whole conversation sent at once (the first's output items as input).
  auto whole = json::parse(R"({"input": []})");
  for (const auto& it : *store.get("resp_1")->items) whole["input"].push_back(json::parse(it.dump()));
  whole["input"].push_back({{"type", "function_call_output"}, {"call_id", "call_00"}, {"output", "20 C"}});
  auto at_once = oa::parse_responses(whole.dump(), models, "resp_3", nullptr);
  BOOST_TEST_REQUIRE(at_once.ok(), at_once.chat.error.message);
  BOOST_TEST_REQUIRE(at_once.chat.req->messages.size() == m.size());
  for (size_t i = 0; i < m.size(); ++i) {
    BOOST_TEST(at_once.chat.req->messages[i].role == m[i].role);
    BOOST_TEST(at_once.chat.req->messages[i].content == m[i].content);
    BOOST_TEST(at_once.chat.req->messages[i].tool_calls_json == m[i].tool_calls_json);
  }
  BOOST_TEST(!at_once.store);  // no store given
}

// OpenAI's input_items: the input a stored response answered (not its output), each item with an
// id, newest first by default, in pages.
BOOST_AUTO_TEST_CASE(input_items_list_the_input_in_pages) {
  oa::response_store store(1 << 20);
  auto p = oa::parse_responses(R"({"input": [{"role": "user", "content": "one"},
      {"type": "message", "role": "assistant", "id": "msg_a", "content": "two"},
      {"role": "user", "content": [{"type": "input_text", "text": "three"}]}]})", models, "resp_ff", &store);
  BOOST_TEST_REQUIRE(p.ok(), p.chat.error.message);
  auto b = builder(p);
  b.set_on_final([&](const nlohmann::ordered_json& r) { oa::keep_response(store, "resp_ff", *p.conversation, r); });
  auto d = done(wire::finish_reason::stop);
  d.has_output = true;
  d.text = "four";
  b.feed(d);
  const auto e = store.get("resp_ff");
  BOOST_TEST_REQUIRE(e.has_value());
  BOOST_TEST(e->num_input == 3u);
  auto page = oa::input_items(*e, "resp_ff", std::nullopt, std::nullopt, std::nullopt);
  BOOST_TEST(page.status == 200);
  auto j = json::parse(page.body);
  BOOST_TEST(j["object"] == "list");
  BOOST_TEST_REQUIRE(j["data"].size() == 3u);  // not the output
  BOOST_TEST(j["data"][0]["content"][0] == json({{"type", "input_text"}, {"text", "three"}}));  // newest first
  BOOST_TEST(j["data"][1]["id"] == "msg_a");
  BOOST_TEST(j["data"][1]["content"][0]["type"] == "output_text");
  BOOST_TEST(j["data"][2]["content"][0]["text"] == "one");
  BOOST_TEST(j["data"][2]["type"] == "message");
  BOOST_TEST(j["first_id"] == j["data"][0]["id"]);
  BOOST_TEST(j["last_id"] == j["data"][2]["id"]);
  BOOST_TEST(j["has_more"] == false);
  page = oa::input_items(*e, "resp_ff", std::string("asc"), std::string("2"), std::nullopt);
  j = json::parse(page.body);
  BOOST_TEST_REQUIRE(j["data"].size() == 2u);
  BOOST_TEST(j["data"][0]["content"][0]["text"] == "one");
  BOOST_TEST(j["has_more"] == true);
  page = oa::input_items(*e, "resp_ff", std::string("asc"), std::string("2"), j["last_id"].get<std::string>());
  j = json::parse(page.body);
  BOOST_TEST_REQUIRE(j["data"].size() == 1u);
  BOOST_TEST(j["data"][0]["content"][0]["text"] == "three");
  BOOST_TEST(j["has_more"] == false);
  for (const auto& [order, limit, after, param] :
       std::vector<std::tuple<std::optional<std::string>, std::optional<std::string>, std::optional<std::string>, std::string>>{
           {std::string("up"), std::nullopt, std::nullopt, "order"},
           {std::nullopt, std::string("0"), std::nullopt, "limit"},
           {std::nullopt, std::string("5x"), std::nullopt, "limit"},
           {std::nullopt, std::nullopt, std::string("nope"), "after"}}) {
    page = oa::input_items(*e, "resp_ff", order, limit, after);
    BOOST_TEST(page.status == 400);
    BOOST_TEST(json::parse(page.body)["error"]["param"] == param);
  }
}

BOOST_AUTO_TEST_CASE(unknown_or_unkept_responses_are_404_and_store_false_keeps_nothing) {
  oa::response_store store(1 << 20);
  auto p = oa::parse_responses(R"({"input": "q", "previous_response_id": "resp_nope"})", models, "resp_1", &store);
  BOOST_TEST(p.chat.error.status == 404);
  BOOST_TEST(p.chat.error.message.find("no response 'resp_nope' is stored here") != std::string::npos);
  p = oa::parse_responses(R"({"input": "q", "previous_response_id": "resp_nope"})", models, "resp_1", nullptr);
  BOOST_TEST(p.chat.error.status == 404);
  BOOST_TEST(p.chat.error.message.find("responses_store_bytes = 0") != std::string::npos, p.chat.error.message);
  p = oa::parse_responses(R"({"input": "q", "store": false})", models, "resp_1", &store);
  BOOST_TEST_REQUIRE(p.ok());
  BOOST_TEST(!p.store);
  BOOST_TEST(json::parse(p.echo_json)["store"] == false);
  // A failed response is not kept.
  p = oa::parse_responses(R"({"input": "q"})", models, "resp_1", &store);
  auto b = builder(p);
  bool called = false;
  b.set_on_final([&](const nlohmann::ordered_json&) { called = true; });
  auto d = done(wire::finish_reason::error);
  d.error = wire::wire_error{wire::error_code::internal, "boom", "x"};
  b.feed(d);
  BOOST_TEST(!called);
}

BOOST_AUTO_TEST_CASE(the_store_drops_the_least_recently_used_beyond_its_bytes) {
  const std::string big(300, 'x');
  auto items = [&] { return nlohmann::ordered_json::array({big}); };
  oa::response_store store(1000);  // room for one entry of ~606 bytes
  store.put("a", items(), big);
  BOOST_TEST(store.size() == 1u);
  const size_t one = store.bytes();
  BOOST_TEST(one > 600u);
  store.put("b", items(), big);  // a goes
  BOOST_TEST(store.size() == 1u);
  BOOST_TEST(!store.get("a"));
  BOOST_TEST(store.get("b").has_value());

  oa::response_store roomy(3 * one);
  roomy.put("a", items(), big);
  roomy.put("b", items(), big);
  roomy.put("c", items(), big);
  BOOST_TEST(roomy.size() == 3u);
  BOOST_TEST(roomy.get("a").has_value());  // a is now the most recent: b is dropped next
  roomy.put("d", items(), big);
  BOOST_TEST(!roomy.get("b"));
  BOOST_TEST((roomy.get("a") && roomy.get("c") && roomy.get("d")));
  BOOST_TEST(roomy.bytes() <= 3 * one);
  roomy.put("a", items(), "short");  // replaced, not added
  BOOST_TEST(roomy.size() == 3u);
  BOOST_TEST(*roomy.get("a")->response == "short");
  BOOST_TEST(roomy.erase("a"));
  BOOST_TEST(!roomy.erase("a"));
  BOOST_TEST(roomy.size() == 2u);
  roomy.put("huge", nlohmann::ordered_json::array({std::string(4 * one, 'y')}), "");  // over the budget alone
  BOOST_TEST(!roomy.get("huge"));
  BOOST_TEST(roomy.size() == 2u);  // and nothing else was dropped for it
}

BOOST_AUTO_TEST_SUITE_END()
