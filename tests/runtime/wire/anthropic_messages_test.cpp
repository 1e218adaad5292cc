// Anthropic's Messages API (POST /v1/messages): messages and their content blocks into chat turns,
// the request's fields into the generate's, refusals naming Anthropic's fields in Anthropic's
// error shape, and a generate's events into a message or its typed server-sent events.
#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include "tests/runtime/wire/typed_sse.hpp"

#include "runtime/wire/anthropic_messages.hpp"

namespace an = troupe::wire::anthropic;
namespace oa = troupe::wire::openai;
namespace wire = troupe::wire;
using json = nlohmann::json;

namespace {

const oa::served_models models{"qwen3", {"sql-lora"}, 4096};

an::parsed_messages parse(const std::string& body, bool count = false) {
  return an::parse_messages(body, models, "msg_00ab", count);
}

std::vector<json> events(const std::string& s) { return troupe::test::typed_events(s); }

wire::token_event tok(std::string text, std::string reasoning = {}) {
  wire::token_event t;
  t.id = "x";
  t.text = std::move(text);
  if (!reasoning.empty()) t.reasoning = std::move(reasoning);
  t.ids = {1};
  return t;
}

wire::done_event done(wire::finish_reason r) {
  wire::done_event d;
  d.reason = r;
  d.usage = {20, 16, 5};  // prompt, cached, completion
  return d;
}

// The text deltas of a stream, joined.
std::string streamed_text(const std::vector<json>& ev, const char* delta_type = "text_delta", const char* field = "text") {
  std::string s;
  for (const auto& e : ev)
    if (e["type"] == "content_block_delta" && e["delta"]["type"] == delta_type) s += e["delta"][field].get<std::string>();
  return s;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(anthropic_messages)

BOOST_AUTO_TEST_CASE(messages_become_chat_turns) {
  auto p = parse(R"({"model": "qwen3", "max_tokens": 100, "system": [{"type": "text", "text": "Be brief.",
      "cache_control": {"type": "ephemeral"}}, {"type": "text", "text": "Use tools."}],
    "messages": [
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": [{"type": "thinking", "thinking": "Call it.", "signature": "abc"},
          {"type": "text", "text": "Checking."},
          {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Paris"}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "20 C"},
          {"type": "tool_result", "tool_use_id": "toolu_2", "content": [{"type": "text", "text": "noon"}], "is_error": false},
          {"type": "text", "text": "Thanks"}, {"type": "text", "text": "Bye"}]}],
    "tools": [{"name": "weather", "description": "d", "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"}}],
    "tool_choice": {"type": "any", "disable_parallel_tool_use": true}, "thinking": {"type": "disabled"},
    "stop_sequences": ["END"], "temperature": 0.5, "top_k": 4, "metadata": {"user_id": "team-a"}, "stream": true,
    "context_management": {"edits": []}})");
  BOOST_TEST_REQUIRE(p.ok(), p.error.message);
  const auto& r = *p.chat.req;
  BOOST_TEST(r.id == "msg_00ab");
  const auto& m = r.messages;
  BOOST_TEST_REQUIRE(m.size() == 6u);
  BOOST_TEST(m[0].role == "system");
  BOOST_TEST(m[0].content == "Be brief.\nUse tools.");
  BOOST_TEST(m[1].role == "user");
  BOOST_TEST(m[2].role == "assistant");
  BOOST_TEST(m[2].content == "Checking.");
  BOOST_TEST(m[2].reasoning_content == "Call it.");
  const auto calls = json::parse(m[2].tool_calls_json);
  BOOST_TEST_REQUIRE(calls.size() == 1u);
  BOOST_TEST(calls[0]["function"]["name"] == "weather");
  // OpenAI's form: the input as JSON text (the chat renderer reads it back into the value).
  BOOST_TEST(json::parse(calls[0]["function"]["arguments"].get<std::string>()) == json({{"city", "Paris"}}));
  BOOST_TEST(m[3].role == "tool");
  BOOST_TEST(m[3].content == "20 C");
  BOOST_TEST(m[4].content == "noon");
  BOOST_TEST(m[5].role == "user");
  BOOST_TEST(m[5].content == "Thanks\nBye");
  BOOST_TEST(*r.max_tokens == 100);
  BOOST_TEST(r.stream);
  BOOST_TEST(r.stop == std::vector<std::string>{"END"});
  BOOST_TEST(r.include_stop_str_in_output);  // the builder names the stop sequence, then takes it off
  BOOST_TEST(p.stop_sequences == std::vector<std::string>{"END"});
  BOOST_TEST(r.tenant == "team-a");
  BOOST_TEST(*r.sampling.top_k == 4);
  BOOST_TEST((r.enable_thinking && !*r.enable_thinking));
  BOOST_TEST(json::parse(r.tools_json)[0]["function"]["name"] == "weather");
  BOOST_REQUIRE(p.chat.forced_tools.has_value());  // any: at least one call, one with parallel use off
  BOOST_TEST(r.separate_reasoning);
}

// An enabled thinking block's budget_tokens is the generate's thinking_token_budget (vLLM's); a
// disabled one, or none, sets no budget.
BOOST_AUTO_TEST_CASE(thinking_budget_tokens_bound_the_thinking) {
  const std::string msg = R"("max_tokens": 100, "messages": [{"role": "user", "content": "x"}])";
  auto p = parse(R"({"thinking": {"type": "enabled", "budget_tokens": 1024}, )" + msg + "}");
  BOOST_TEST_REQUIRE(p.ok(), p.error.message);
  BOOST_TEST(p.chat.req->thinking_token_budget.value_or(-1) == 1024);
  BOOST_TEST((p.chat.req->enable_thinking && *p.chat.req->enable_thinking));
  p = parse(R"({"thinking": {"type": "disabled", "budget_tokens": 1024}, )" + msg + "}");
  BOOST_TEST_REQUIRE(p.ok(), p.error.message);
  BOOST_TEST(!p.chat.req->thinking_token_budget.has_value());
  p = parse(R"({"thinking": {"type": "enabled"}, )" + msg + "}");
  BOOST_TEST_REQUIRE(p.ok(), p.error.message);
  BOOST_TEST(!p.chat.req->thinking_token_budget.has_value());
  p = parse(R"({"thinking": {"type": "enabled", "budget_tokens": -5}, )" + msg + "}");
  BOOST_TEST(!p.ok());
  BOOST_TEST(p.error.param == "thinking.budget_tokens");
}

BOOST_AUTO_TEST_CASE(count_tokens_is_the_prompts_tokenize) {
  auto p = parse(R"({"model": "qwen3", "system": "Be brief.", "messages": [{"role": "user", "content": "Hi"}],
      "tools": [{"name": "f", "input_schema": {"type": "object"}}], "thinking": {"type": "enabled", "budget_tokens": 2048}})",
                 true);
  BOOST_TEST_REQUIRE(p.ok(), p.error.message);
  BOOST_TEST(!p.chat.ok());
  BOOST_REQUIRE(p.count.has_value());
  BOOST_TEST_REQUIRE(p.count->messages.size() == 2u);
  BOOST_TEST(p.count->messages[0].role == "system");
  BOOST_TEST(!p.count->tools_json.empty());
  BOOST_TEST((p.count->enable_thinking && *p.count->enable_thinking));
  BOOST_TEST(an::count_body(17) == R"({"input_tokens":17})");
  auto bad = parse(R"({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 5})", true);
  BOOST_TEST(!bad.ok());
  BOOST_TEST(bad.error.param == "max_tokens");
}

BOOST_AUTO_TEST_CASE(bad_requests_name_anthropics_field) {
  const std::string msg = R"("messages": [{"role": "user", "content": "x"}])";
  struct bad {
    std::string body;
    int status;
    std::string code, param;
  };
  const std::vector<bad> cases = {
      {"{" + msg + "}", 400, "missing_field", "max_tokens"},
      {R"({"max_tokens": 5})", 400, "missing_field", "messages"},
      {R"({"max_tokens": 5, "messages": []})", 400, "invalid_value", "messages"},
      {R"({"max_tokens": 0, )" + msg + "}", 400, "invalid_value", "max_tokens"},
      {R"({"max_tokens": 5, "messages": [{"role": "system", "content": "x"}]})", 400, "invalid_value", "messages[0].role"},
      {R"({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]})", 400,
       "unsupported", "messages[0].content[0].type"},
      {R"({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "tool_use", "id": "t", "name": "f",
          "input": {}}]}]})", 400, "invalid_value", "messages[0].content[0].type"},
      {R"({"max_tokens": 5, "messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f",
          "input": "x"}]}]})", 400, "wrong_type", "messages[0].content[0].input"},
      {R"({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "tool_result"}]}]})", 400, "missing_field",
       "messages[0].content[0].tool_use_id"},
      {R"({"max_tokens": 5, "messages": [{"role": "user", "content": "x", "name": "n"}]})", 400, "unknown_field",
       "messages[0].name"},
      {R"({"max_tokens": 5, "tools": [{"type": "web_search_20250305", "name": "web_search"}], )" + msg + "}", 400,
       "unsupported", "tools[0].type"},
      {R"({"max_tokens": 5, "tools": [{"name": "f"}], )" + msg + "}", 400, "missing_field", "tools[0].input_schema"},
      {R"({"max_tokens": 5, "tool_choice": {"type": "some"}, )" + msg + "}", 400, "invalid_value", "tool_choice.type"},
      {R"({"max_tokens": 5, "tool_choice": {"type": "tool", "name": "nope"}, "tools": [{"name": "f",
          "input_schema": {"type": "object"}}], )" + msg + "}", 400, "invalid_value", "tool_choice"},
      {R"({"max_tokens": 5, "thinking": {"type": "maybe"}, )" + msg + "}", 400, "invalid_value", "thinking.type"},
      {R"({"max_tokens": 5, "container": "c", )" + msg + "}", 400, "unsupported", "container"},
      {R"({"max_tokens": 5, "context_management": 1, )" + msg + "}", 400, "wrong_type", "context_management"},
      {R"({"max_tokens": 5, "thinking": {"type": "enabled", "budget_tokens": "lots"}, )" + msg + "}", 400, "wrong_type",
       "thinking.budget_tokens"},
      {R"({"max_tokens": 5, "metadata": {"session": "s"}, )" + msg + "}", 400, "unknown_field", "metadata.session"},
      {R"({"max_tokens": 5, "system": 3, )" + msg + "}", 400, "wrong_type", "system"},
      {R"({"max_tokens": 5, "system": [{"type": "image"}], )" + msg + "}", 400, "unsupported", "system[0].type"},
      {R"({"max_tokens": 5, "tool_choice": {"type": "auto", "disable_parallel_tool_use": 1}, )" + msg + "}", 400,
       "wrong_type", "tool_choice.disable_parallel_tool_use"},
      {R"({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",
          "is_error": "yes"}]}]})", 400, "wrong_type", "messages[0].content[0].is_error"},
      {R"({"max_tokens": 5, "stop_sequences": "END", )" + msg + "}", 400, "wrong_type", "stop_sequences"},
      {R"({"max_tokens": 5, "temperature": -1, )" + msg + "}", 400, "invalid_value", "temperature"},
      {R"({"max_tokens": 5, "frobnicate": 1, )" + msg + "}", 400, "unknown_field", "frobnicate"},
      {R"({"max_tokens": 5, "model": "claude-sonnet", )" + msg + "}", 404, "model_not_found", "model"},
      {R"({"max_tokens": 5)", 400, "malformed", ""},
  };
  for (const auto& c : cases) {
    auto p = parse(c.body);
    BOOST_TEST_REQUIRE(!p.ok(), c.body);
    BOOST_TEST(p.error.status == c.status, c.body);
    BOOST_TEST(p.error.code == c.code, c.body << ": " << p.error.code << " " << p.error.message);
    const auto& e = p.error;
    BOOST_TEST((e.param == c.param || (e.param.empty() && e.message.find("'" + c.param + "'") != std::string::npos)),
               c.body << ": " << e.param << " " << e.message);
    const auto body = json::parse(an::error_body(e));
    BOOST_TEST(body["type"] == "error");
    BOOST_TEST(body["error"]["type"] == (c.status == 404 ? "not_found_error" : "invalid_request_error"));
    BOOST_TEST(!body["error"]["message"].get<std::string>().empty());
  }
  BOOST_TEST(json::parse(an::error_body({401, "wrong key", "invalid_api_key", ""}))["error"]["type"] == "authentication_error");
  BOOST_TEST(json::parse(an::error_body({429, "busy", "too_many_requests", ""}))["error"]["type"] == "rate_limit_error");
  BOOST_TEST(json::parse(an::error_body({500, "x", "internal", ""}))["error"]["type"] == "api_error");
}

BOOST_AUTO_TEST_CASE(a_whole_message) {
  auto p = parse(R"({"max_tokens": 50, "messages": [{"role": "user", "content": "q"}],
      "tools": [{"name": "weather", "input_schema": {"type": "object"}}]})");
  BOOST_TEST_REQUIRE(p.ok(), p.error.message);
  an::messages_builder b(p);
  auto d = done(wire::finish_reason::stop);
  d.has_output = true;
  d.reasoning = "hmm";
  d.text = "Let me check.\n<tool_call>\n{\"name\": \"weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
  d.tool_calls = {{"weather", "{\"city\": \"Paris\"}"}};
  const auto m = json::parse(b.feed(d));
  BOOST_TEST(b.complete());
  BOOST_TEST(b.status() == 200);
  BOOST_TEST(m["id"] == "msg_00ab");
  BOOST_TEST(m["type"] == "message");
  BOOST_TEST(m["role"] == "assistant");
  BOOST_TEST(m["model"] == "qwen3");
  BOOST_TEST_REQUIRE(m["content"].size() == 3u, m.dump());
  BOOST_TEST(m["content"][0] == json({{"type", "thinking"}, {"thinking", "hmm"}, {"signature", ""}}));
  BOOST_TEST(m["content"][1] == json({{"type", "text"}, {"text", "Let me check."}}));
  BOOST_TEST(m["content"][2]["type"] == "tool_use");
  BOOST_TEST(m["content"][2]["name"] == "weather");
  BOOST_TEST(m["content"][2]["input"] == json({{"city", "Paris"}}));
  BOOST_TEST(m["content"][2]["id"].get<std::string>().rfind("toolu_", 0) == 0);
  BOOST_TEST(m["stop_reason"] == "tool_use");
  BOOST_TEST(m["stop_sequence"] == nullptr);
  BOOST_TEST(m["usage"] == json({{"input_tokens", 4}, {"cache_creation_input_tokens", 0}, {"cache_read_input_tokens", 16},
                                 {"output_tokens", 5}}));

  // A stop sequence: named, and not in the text; max_tokens; an empty answer is one empty text block.
  auto ps = parse(R"({"max_tokens": 50, "messages": [{"role": "user", "content": "q"}], "stop_sequences": ["###", "END"]})");
  an::messages_builder bs(ps);
  d = done(wire::finish_reason::stop);
  d.has_output = true;
  d.text = "Hello END";
  auto ms = json::parse(bs.feed(d));
  BOOST_TEST(ms["content"][0]["text"] == "Hello ");
  BOOST_TEST(ms["stop_reason"] == "stop_sequence");
  BOOST_TEST(ms["stop_sequence"] == "END");
  an::messages_builder bl(ps);
  d.reason = wire::finish_reason::length;
  d.text = "Hello EN";
  ms = json::parse(bl.feed(d));
  BOOST_TEST(ms["content"][0]["text"] == "Hello EN");
  BOOST_TEST(ms["stop_reason"] == "max_tokens");
  BOOST_TEST(ms["stop_sequence"] == nullptr);
  an::messages_builder be(ps);
  d.reason = wire::finish_reason::stop;
  d.text = "";
  ms = json::parse(be.feed(d));
  BOOST_TEST(ms["content"] == json::parse(R"([{"type": "text", "text": ""}])"));
  BOOST_TEST(ms["stop_reason"] == "end_turn");
}

BOOST_AUTO_TEST_CASE(a_stream_has_anthropics_events_in_order) {
  auto p = parse(R"({"max_tokens": 50, "messages": [{"role": "user", "content": "q"}], "stream": true,
      "stop_sequences": ["END"]})");
  BOOST_TEST_REQUIRE(p.ok(), p.error.message);
  an::messages_builder b(p);
  BOOST_TEST(b.streaming());
  auto first = tok("", "hm");
  first.prompt_tokens = 20;
  std::string s = b.feed(first);
  s += b.feed(tok("", "m"));
  s += b.feed(tok("Hel"));
  s += b.feed(tok("lo E"));  // "E" may begin END: held back
  const auto so_far = events(s);
  BOOST_TEST(streamed_text(so_far) == "Hello ");
  s += b.feed(tok("ND"));
  s += b.feed(done(wire::finish_reason::stop));
  BOOST_TEST(b.complete());
  const auto ev = events(s);
  std::vector<std::string> types;
  for (const auto& e : ev) types.push_back(e["type"]);
  const std::vector<std::string> want = {"message_start",       "content_block_start", "content_block_delta",
                                         "content_block_delta", "content_block_stop",  "content_block_start",
                                         "content_block_delta", "content_block_delta", "content_block_stop",
                                         "message_delta",       "message_stop"};
  BOOST_TEST(types == want, boost::test_tools::per_element());
  BOOST_TEST(ev[0]["message"]["usage"]["input_tokens"] == 20);
  BOOST_TEST(ev[0]["message"]["content"] == json::array());
  BOOST_TEST(ev[1]["index"] == 0);
  BOOST_TEST(ev[1]["content_block"]["type"] == "thinking");
  BOOST_TEST(streamed_text(ev, "thinking_delta", "thinking") == "hmm");
  BOOST_TEST(ev[5]["index"] == 1);
  BOOST_TEST(ev[5]["content_block"] == json({{"type", "text"}, {"text", ""}}));
  BOOST_TEST(streamed_text(ev) == "Hello ");  // the stop sequence never went out
  BOOST_TEST(ev[9]["delta"]["stop_reason"] == "stop_sequence");
  BOOST_TEST(ev[9]["delta"]["stop_sequence"] == "END");
  BOOST_TEST(ev[9]["usage"]["output_tokens"] == 5);
  BOOST_TEST(ev[9]["usage"]["cache_read_input_tokens"] == 16);
}

// Qwen3's JSON calls stream as tool_use blocks whose input_json_delta pieces add up to the
// arguments as written; text before the call is a text block; the message ends with tool_use.
BOOST_AUTO_TEST_CASE(a_streamed_call_is_a_tool_use_block) {
  auto p = parse(R"({"max_tokens": 50, "messages": [{"role": "user", "content": "q"}], "stream": true,
      "tools": [{"name": "weather", "input_schema": {"type": "object"}}]})");
  BOOST_TEST_REQUIRE(p.ok(), p.error.message);
  for (bool pieces : {true, false}) {
    BOOST_TEST_CONTEXT("stream_tool_arguments " << pieces) {
      p.chat.stream_tool_arguments = pieces;
      an::messages_builder b(p);
      std::string s = b.feed(tok("Let me check.\n<tool"));
      s += b.feed(tok("_call>\n{\"name\": \"weather\", \"arguments\": {\"city\": "));
      s += b.feed(tok("\"Paris\"}}\n</tool_call>"));
      auto d = done(wire::finish_reason::stop);
      d.tool_calls = {{"weather", "{\"city\": \"Paris\"}"}};
      s += b.feed(d);
      const auto ev = events(s);
      BOOST_TEST(streamed_text(ev) == "Let me check.\n");
      json call;
      int starts = 0;
      for (const auto& e : ev)
        if (e["type"] == "content_block_start" && e["content_block"]["type"] == "tool_use") {
          call = e;
          ++starts;
        }
      BOOST_TEST_REQUIRE(starts == 1);
      BOOST_TEST(call["index"] == 1);
      BOOST_TEST(call["content_block"]["name"] == "weather");
      BOOST_TEST(call["content_block"]["input"] == json::object());
      BOOST_TEST(json::parse(streamed_text(ev, "input_json_delta", "partial_json")) == json({{"city", "Paris"}}));
      int stops = 0;
      for (const auto& e : ev) stops += e["type"] == "content_block_stop";
      BOOST_TEST(stops == 2);
      BOOST_TEST(ev[ev.size() - 2]["delta"]["stop_reason"] == "tool_use");
    }
  }
}

BOOST_AUTO_TEST_CASE(errors_are_anthropics) {
  auto p = parse(R"({"max_tokens": 50, "messages": [{"role": "user", "content": "q"}], "stream": true})");
  an::messages_builder before(p);
  auto d = done(wire::finish_reason::error);
  d.error = wire::wire_error{wire::error_code::prompt_too_long, "prompt has 9000 tokens", "x"};
  const auto body = before.feed(d);
  BOOST_TEST(before.status() == 400);
  BOOST_TEST(!before.streaming());
  BOOST_TEST(json::parse(body)["error"]["type"] == "invalid_request_error");
  an::messages_builder after(p);
  std::string s = after.feed(tok("Hi"));
  s += after.feed(wire::event{wire::wire_error{wire::error_code::internal, "the executor failed", "x"}});
  const auto ev = events(s);
  BOOST_TEST(ev.back()["type"] == "error");
  BOOST_TEST(ev.back()["error"]["type"] == "api_error");
  BOOST_TEST(after.complete());
}

BOOST_AUTO_TEST_SUITE_END()
