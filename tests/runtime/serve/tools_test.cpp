// Chat prompts through the whole request path: every reference conversation of
// tests/data/chat_template (tools, tool calls, tool responses, reasoning) and of
// tests/data/tokenizer/continue_final_message_cases.json (assistant prefill) encoded as a client
// would send it, decoded by the server's codec, rendered and tokenized, must give the reference
// ids. Also the tool calls the server reports from a completion (parse_tool_calls), and on the
// done event of a request that offered tools.
#include <boost/test/unit_test.hpp>

#include <fstream>

#include <nlohmann/json.hpp>

#include "runtime/serve/chat_renderer.hpp"
#include "runtime/serve/response.hpp"
#include "runtime/serve/tool_calls.hpp"
#include "runtime/wire/event_codec.hpp"
#include "runtime/wire/frame.hpp"
#include "runtime/wire/request_codec.hpp"
#include "tests/runtime/serve/qwen_fixture.hpp"

using namespace troupe;
using namespace troupe::serve;
using troupe::serve::test::events_of;
using troupe::serve::test::qwen_facts;
using ojson = nlohmann::ordered_json;

namespace {

// A reference case as a client's generate request.
wire::generate_request as_request(const ojson& c) {
  wire::generate_request r;
  r.id = c["name"].get<std::string>();
  r.kind = wire::prompt_kind::messages;
  for (const auto& m : c["messages"]) {
    wire::chat_message w;
    w.role = m["role"].get<std::string>();
    w.content = m.value("content", std::string());
    w.reasoning_content = m.value("reasoning_content", std::string());
    if (m.contains("tool_calls")) w.tool_calls_json = m["tool_calls"].dump();
    r.messages.push_back(std::move(w));
  }
  if (c.contains("enable_thinking")) r.enable_thinking = c["enable_thinking"].get<bool>();
  if (c.contains("tools")) r.tools_json = c["tools"].dump();
  r.continue_final_message = c.value("continue_final_message", false);
  r.add_generation_prompt = c.value("add_generation_prompt", false);
  return r;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(tools_suite)

BOOST_AUTO_TEST_CASE(reference_conversations_through_the_codec) {
  std::ifstream in(TROUPE_TEST_DATA_DIR "/chat_template/cases.jsonl");
  std::string line;
  int checked = 0, with_tools = 0;
  while (std::getline(in, line)) {
    const ojson c = ojson::parse(line);
    const auto decoded = wire::decode_request(wire::encode_request(as_request(c)));
    BOOST_REQUIRE_MESSAGE(decoded.req, c["name"] << ": " << decoded.error.message);
    const auto& r = std::get<wire::generate_request>(*decoded.req);
    auto t = prompt_ids(r, qwen_facts());
    BOOST_REQUIRE_MESSAGE(!t.error, c["name"] << ": " << (t.error ? t.error->message : ""));
    BOOST_TEST(t.ids == c["ids"].get<std::vector<int32_t>>(), c["name"] << ": ids differ from the reference");
    ++checked;
    with_tools += c.contains("tools");
  }
  BOOST_TEST(checked == 11);
  BOOST_TEST(with_tools >= 2);
  // The model continuing the final message (assistant prefill), against transformers' renders.
  std::ifstream cont(TROUPE_TEST_DATA_DIR "/tokenizer/continue_final_message_cases.json");
  int continued = 0;
  for (const auto& c : ojson::parse(cont)) {
    const auto decoded = wire::decode_request(wire::encode_request(as_request(c)));
    BOOST_REQUIRE_MESSAGE(decoded.req, c["name"] << ": " << decoded.error.message);
    auto t = prompt_ids(std::get<wire::generate_request>(*decoded.req), qwen_facts());
    BOOST_REQUIRE_MESSAGE(!t.error, c["name"] << ": " << (t.error ? t.error->message : ""));
    BOOST_TEST(t.ids == c["ids"].get<std::vector<int32_t>>(), c["name"] << ": ids differ from the reference");
    continued += c["continue_final_message"].get<bool>();
  }
  BOOST_TEST(continued == 6);
}

// OpenAI's clients send a call's arguments as JSON text, the references (transformers) as an
// object: as vLLM, the server reads the text into the object before the template runs, so both
// give the same prompt. Text that is not JSON is refused naming the call.
BOOST_AUTO_TEST_CASE(call_arguments_as_json_text_render_as_objects) {
  std::ifstream in(TROUPE_TEST_DATA_DIR "/chat_template/cases.jsonl");
  std::string line;
  int calls = 0;
  while (std::getline(in, line)) {
    ojson c = ojson::parse(line);
    bool changed = false;
    for (auto& m : c["messages"])
      if (m.contains("tool_calls"))
        for (auto& call : m["tool_calls"]) {
          auto& f = call.contains("function") ? call["function"] : call;
          if (f.contains("arguments") && !f["arguments"].is_string()) {
            f["arguments"] = f["arguments"].dump();  // compact, as a model's output parsed back
            changed = true;
            ++calls;
          }
        }
    if (!changed) continue;
    auto t = prompt_ids(as_request(c), qwen_facts());
    BOOST_REQUIRE_MESSAGE(!t.error, c["name"] << ": " << (t.error ? t.error->message : ""));
    BOOST_TEST(t.ids == c["ids"].get<std::vector<int32_t>>(), c["name"] << ": ids differ from the reference");
  }
  BOOST_TEST(calls >= 1);
  wire::generate_request bad;
  bad.id = "bad";
  bad.kind = wire::prompt_kind::messages;
  bad.messages = {{"user", "q", "", ""},
                  {"assistant", "", "", R"([{"type": "function", "function": {"name": "f", "arguments": "{\"a\": "}}])"}};
  auto t = prompt_ids(bad, qwen_facts());
  BOOST_TEST_REQUIRE(t.error.has_value());
  BOOST_TEST(t.error->message.find("messages[1].tool_calls[0] arguments are not JSON") != std::string::npos,
             t.error->message);
}

BOOST_AUTO_TEST_CASE(tool_calls_in_a_completion) {
  auto calls = parse_tool_calls(
      "<think>\nweather first\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
      "{\"city\": \"Zürich\", \"days\": 2}}\n</tool_call>\n<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n"
      "</tool_call>");
  BOOST_REQUIRE_EQUAL(calls.size(), 2u);
  BOOST_TEST(calls[0].name == "get_weather");
  BOOST_TEST(calls[0].arguments == "{\"city\":\"Zürich\",\"days\":2}");
  BOOST_TEST(calls[1].name == "now");
  BOOST_TEST(calls[1].arguments == "{}");
  // A last block cut off by max_tokens still counts when its JSON is whole; arguments given as
  // a string are passed on as they are.
  calls = parse_tool_calls("<tool_call>\n{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}\n");
  BOOST_REQUIRE_EQUAL(calls.size(), 1u);
  BOOST_TEST(calls[0].arguments == "{\"a\": 1}");
  // No calls: plain text, malformed JSON anywhere, a name that is not a string, arguments that
  // are neither an object nor a string.
  BOOST_TEST(parse_tool_calls("It is sunny.").empty());
  BOOST_TEST(parse_tool_calls("<tool_call>{\"name\": \"a\"}</tool_call><tool_call>{\"name\": </tool_call>").empty());
  BOOST_TEST(parse_tool_calls("<tool_call>{\"name\": 3}</tool_call>").empty());
  BOOST_TEST(parse_tool_calls("<tool_call>{\"name\": \"a\", \"arguments\": [1]}</tool_call>").empty());
  BOOST_TEST(parse_tool_calls("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\"").empty());
}

// Qwen3-Coder's XML calls (vLLM's qwen3_coder parser): each value typed by the offered tool's schema,
// the text itself where it does not read as that type or the schema does not name the parameter.
BOOST_AUTO_TEST_CASE(qwen3_coder_calls_in_a_completion) {
  const std::string tools = R"([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}, "days": {"type": "integer"}, "opts": {"type": "object"},
      "ratio": {"type": "number"}, "whole": {"type": "number"}, "flag": {"type": "boolean"},
      "tags": {"type": "array"}, "zip": {"type": "string"}, "bad_int": {"type": "integer"}}}}},
      {"type": "function", "function": {"name": "noop"}}])";
  const std::string text =
      "I'll check.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
      "<parameter=days>\n2\n</parameter>\n<parameter=opts>\n{\"a\": true}\n</parameter>\n"
      "<parameter=ratio>\n1.5\n</parameter>\n<parameter=whole>\n3.0\n</parameter>\n<parameter=flag>\nTrue\n</parameter>\n"
      "<parameter=tags>\n[\"x\", \"y\"]\n</parameter>\n<parameter=zip>\n00123\n</parameter>\n"
      "<parameter=bad_int>\ntwo\n</parameter>\n<parameter=note>\nline1\nline2\n</parameter>\n"
      "<parameter=gone>\nnull\n</parameter>\n</function>\n</tool_call>\n"
      "<tool_call>\n<function=noop>\n</function>\n</tool_call>";
  auto calls = parse_tool_calls(text, tool_call_format::qwen3_coder, tools);
  BOOST_REQUIRE_EQUAL(calls.size(), 2u);
  BOOST_TEST(calls[0].name == "get_weather");
  BOOST_TEST(calls[0].arguments ==
             R"({"city":"Paris","days":2,"opts":{"a":true},"ratio":1.5,"whole":3,"flag":true,"tags":["x","y"],)"
             R"("zip":"00123","bad_int":"two","note":"line1\nline2","gone":null})");
  BOOST_TEST(calls[1].name == "noop");
  BOOST_TEST(calls[1].arguments == "{}");
  // Read as hermes JSON, the same text has no calls; a Qwen3-Coder parse of hermes JSON neither.
  BOOST_TEST(parse_tool_calls(text).empty());
  BOOST_TEST(parse_tool_calls("<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>",
                              tool_call_format::qwen3_coder, tools)
                 .empty());
  // A call cut off by max_tokens still counts, its last value as far as it came; a parameter not
  // closed before the next; no tools offered: every value a string.
  calls = parse_tool_calls("<tool_call>\n<function=f>\n<parameter=a>\n1\n<parameter=b>\nx",
                           tool_call_format::qwen3_coder, "");
  BOOST_REQUIRE_EQUAL(calls.size(), 1u);
  BOOST_TEST(calls[0].arguments == R"({"a":"1","b":"x"})");
  // Malformed: a block without a function, a function without a name.
  BOOST_TEST(parse_tool_calls("<tool_call>\nhello\n</tool_call>", tool_call_format::qwen3_coder, tools).empty());
  BOOST_TEST(parse_tool_calls("<tool_call><function=>\n</function></tool_call>", tool_call_format::qwen3_coder, tools).empty());
  // The format a chat template teaches: Qwen3's is hermes; one printing <parameter= is Qwen3-Coder's.
  BOOST_TEST((tool_call_format_for(chat_template::from_directory(TROUPE_SOURCE_DIR "/models/qwen3-tokenizer").source()) ==
              tool_call_format::hermes));
  BOOST_TEST((tool_call_format_for("{{- '<tool_call>\\n<function=' + name + '>\\n<parameter=' + p + '>' }}") ==
              tool_call_format::qwen3_coder));
  // On a request's done event, with the request's tools.
  const tokenizer& tok = *qwen_facts().tok;
  output_rules rules{.find_tool_calls = true};
  rules.tool_format = tool_call_format::qwen3_coder;
  rules.tools_json = tools;
  response r("c1", false, &tok, rules, 12, clock::now());
  std::string bytes;
  for (int32_t id : tok.encode(text)) r.add_token(id, clock::now(), bytes);
  r.finish(wire::finish_reason::stop, std::nullopt, clock::now(), bytes);
  const auto& done = std::get<wire::done_event>(events_of(bytes).back());
  BOOST_REQUIRE_EQUAL(done.tool_calls.size(), 2u);
  BOOST_TEST(done.tool_calls[0].arguments.find(R"("days":2)") != std::string::npos);
}

// Qwen3's <tool_call> tokens are ordinary added tokens: their text streams like any other, and
// the done event of a request with tools lists the calls (streamed or not).
BOOST_AUTO_TEST_CASE(done_event_carries_the_calls) {
  const tokenizer& tok = *qwen_facts().tok;
  const std::string completion =
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>";
  const auto ids = tok.encode(completion);
  BOOST_TEST(std::count(ids.begin(), ids.end(), 151657) == 1);  // <tool_call> is one token
  for (bool stream : {true, false})
    for (bool offered : {true, false}) {
      response r("c1", stream, &tok, {.find_tool_calls = offered}, 12, clock::now());
      std::string bytes;
      for (int32_t id : ids) r.add_token(id, clock::now(), bytes);
      r.finish(wire::finish_reason::stop, std::nullopt, clock::now(), bytes);
      auto evs = events_of(bytes);
      std::string text;
      for (const auto& e : evs)
        if (const auto* t = std::get_if<wire::token_event>(&e)) text += t->text;
      const auto& done = std::get<wire::done_event>(evs.back());
      BOOST_TEST((stream ? text : done.text) == completion);
      if (offered) {
        BOOST_REQUIRE_EQUAL(done.tool_calls.size(), 1u);
        BOOST_TEST(done.tool_calls[0].name == "get_weather");
        BOOST_TEST(done.tool_calls[0].arguments == R"({"city":"Rome"})");
      } else {
        BOOST_TEST(done.tool_calls.empty());
      }
    }
}

BOOST_AUTO_TEST_SUITE_END()
