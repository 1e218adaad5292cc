// Qwen3's tool calls as they stream: however the text is cut, the content before the first call
// is sent whole, each call is announced once with its name, and its arguments' pieces add up to
// exactly the arguments the model wrote; blocks shaped otherwise stream nothing.
#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include "runtime/wire/tool_call_stream.hpp"

using troupe::wire::tool_call_stream;

namespace {

struct streamed {
  std::string content;
  std::vector<std::string> names, arguments;
  int begins = 0;
};

streamed feed(const std::string& text, size_t piece, tool_call_stream& s) {
  streamed out;
  for (size_t i = 0; i < text.size(); i += piece) {
    auto p = s.push(std::string_view(text).substr(i, piece));
    out.content += p.content;
    for (auto& c : p.calls) {
      if (c.begins) {
        BOOST_TEST(c.index == out.names.size());
        out.names.push_back(c.name);
        out.arguments.emplace_back();
        ++out.begins;
      }
      BOOST_TEST_REQUIRE(c.index < out.arguments.size());
      out.arguments[c.index] += c.arguments;
    }
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(tool_call_stream_suite)

BOOST_AUTO_TEST_CASE(calls_stream_however_the_text_is_cut) {
  const std::string args1 = R"({"path": "a.c", "code": "if (x) { y = \"}\"; }\n", "list": [1, {"a": [2]}]})";
  const std::string args2 = R"({})";
  const std::string text = "Let me check.\n<tool_call>\n{\"name\": \"write_file\", \"arguments\": " + args1 +
                           "}\n</tool_call>\n<tool_call>\n{\"name\": \"n\\u00e9\", \"arguments\": " + args2 +
                           "}\n</tool_call>";
  for (size_t piece = 1; piece <= text.size(); ++piece) {
    tool_call_stream s;
    const auto got = feed(text, piece, s);
    BOOST_TEST_CONTEXT("pieces of " << piece) {
      BOOST_TEST(got.content == "Let me check.\n");
      BOOST_TEST_REQUIRE(got.names.size() == 2u);
      BOOST_TEST(got.names[0] == "write_file");
      BOOST_TEST(got.names[1] == "n\xc3\xa9");
      BOOST_TEST(got.arguments[0] == args1);
      BOOST_TEST(got.arguments[1] == args2);
      BOOST_TEST(s.complete() == 2u);
      BOOST_TEST(s.arguments(0) == args1);
    }
  }
}

BOOST_AUTO_TEST_CASE(text_that_is_no_call_and_blocks_shaped_otherwise) {
  tool_call_stream plain;
  auto p = plain.push("a <tool");
  BOOST_TEST(p.content == "a ");  // "<tool" may begin the tag
  p = plain.push("box> b");
  BOOST_TEST(p.content == "<toolbox> b");
  BOOST_TEST(!plain.in_calls());
  // Arguments before the name, or not an object: nothing streams (the done event has the call).
  for (const std::string block : {R"({"arguments": {"a": 1}, "name": "f"})", R"({"name": "f", "arguments": "{\"a\": 1}"})",
                                  R"(["f"])"}) {
    tool_call_stream s;
    const auto got = feed("<tool_call>\n" + block + "\n</tool_call>", 3, s);
    BOOST_TEST(got.begins == 0, block);
    BOOST_TEST(s.in_calls());
    BOOST_TEST(s.held().find(block) != std::string::npos);
  }
  // Text after a call stops the streaming: a later call comes whole at the end.
  tool_call_stream after;
  const auto got = feed("<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>\nDone.\n<tool_call>\n"
                        "{\"name\": \"g\", \"arguments\": {}}\n</tool_call>",
                        5, after);
  BOOST_TEST(got.begins == 1);
  BOOST_TEST(after.complete() == 1u);
  // Cut short inside the arguments: begun, not complete.
  tool_call_stream cut;
  const auto partial = feed("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1, 2", 4, cut);
  BOOST_TEST(partial.begins == 1);
  BOOST_TEST(partial.arguments[0] == "{\"a\": [1, 2");
  BOOST_TEST(cut.begun() == 1u);
  BOOST_TEST(cut.complete() == 0u);
}

// call_holder: the one object the three reply builders hold text back with, in each mode, however
// the text is cut: what goes out at once plus what is held add up to the text.
BOOST_AUTO_TEST_CASE(call_holder_modes) {
  using troupe::wire::call_holder;
  using mode = call_holder::mode;
  BOOST_TEST((call_holder::for_reply(false, false, true) == mode::pass));
  BOOST_TEST((call_holder::for_reply(true, false, false) == mode::hold));
  BOOST_TEST((call_holder::for_reply(true, false, true) == mode::stream));
  BOOST_TEST((call_holder::for_reply(true, true, true) == mode::hold_all));  // a forced call: all of it
  const std::string text = R"(Let me check. <tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call>)";
  const size_t before = text.find("<tool_call>");
  for (size_t piece : {1, 3, 7, 200}) {
    struct want {
      mode m;
      std::string sent, held;
    };
    for (const auto& w : {want{mode::pass, text, ""}, want{mode::hold, text.substr(0, before), text.substr(before)},
                          want{mode::hold_all, "", text}, want{mode::stream, text.substr(0, before), text.substr(before)}}) {
      call_holder h(w.m);
      std::string sent, args;
      size_t begins = 0;
      for (size_t i = 0; i < text.size(); i += piece) {
        auto p = h.push(std::string_view(text).substr(i, piece));
        sent += p.content;
        for (const auto& c : p.calls) {
          begins += c.begins;
          args += c.arguments;
        }
      }
      BOOST_TEST(sent == w.sent, piece);
      BOOST_TEST(h.take_held() == w.held, piece);
      BOOST_TEST(h.streams_calls() == (w.m == mode::stream));
      BOOST_TEST(h.streamed() == (w.m == mode::stream ? 1u : 0u));
      BOOST_TEST(h.complete() == h.streamed());
      if (w.m == mode::stream) {
        BOOST_TEST(begins == 1u);
        BOOST_TEST(nlohmann::json::parse(args) == nlohmann::json::parse(R"({"a": 1})"));
      } else {
        BOOST_TEST(h.take_held().empty());  // taken out
      }
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
