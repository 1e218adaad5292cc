// The Qwen3 chat template from tokenizer_config.json, run by the Jinja engine: every reference
// case renders to the exact text and ids; loading and input errors are clear.
#include <boost/test/unit_test.hpp>

#include <fstream>

#include "runtime/tokenizer/chat_template.hpp"
#include "tests/runtime/tokenizer/test_util.hpp"

using troupe::chat_request;
using troupe::chat_template;
using troupe::errc;
using troupe::test::expect_error;
using troupe::test::qwen;
using ojson = nlohmann::ordered_json;

namespace {

const chat_template& qwen_template() {
  static const chat_template t = chat_template::from_directory(troupe::test::qwen_dir());
  return t;
}

chat_request request_of(const ojson& c) {
  chat_request r;
  r.messages = c["messages"];
  if (c.contains("tools")) r.tools = c["tools"];
  r.add_generation_prompt = c.value("add_generation_prompt", false);
  if (c.contains("enable_thinking")) r.extra["enable_thinking"] = c["enable_thinking"];
  return r;
}

ojson user(const std::string& text) { return {{"role", "user"}, {"content", text}}; }

}  // namespace

BOOST_AUTO_TEST_SUITE(chat_template_suite)

BOOST_AUTO_TEST_CASE(every_reference_case_renders_exactly) {
  auto cases = troupe::test::read_jsonl(std::string(TROUPE_TEST_DATA_DIR) + "/chat_template/cases.jsonl");
  BOOST_TEST(cases.size() == 11u);
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT(c["name"].get<std::string>()) {
      std::string text = qwen_template().render(request_of(c));
      BOOST_TEST(text == c["text"].get<std::string>());
      BOOST_TEST(qwen().encode(text) == c["ids"].get<std::vector<int32_t>>());
    }
  }
}

// The model continuing the final message (assistant prefill): exactly transformers' render with
// continue_final_message (tests/data/tokenizer/continue_final_message_cases.json, written by
// tools/reference/continue_final_message_cases.py), and the closed form beside each.
BOOST_AUTO_TEST_CASE(continuing_the_final_message_renders_as_transformers) {
  std::ifstream in(std::string(TROUPE_TEST_DATA_DIR) + "/tokenizer/continue_final_message_cases.json");
  const auto cases = ojson::parse(in);
  BOOST_TEST(cases.size() == 12u);
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT(c["name"].get<std::string>()) {
      chat_request r;
      r.messages = c["messages"];
      r.continue_final_message = c["continue_final_message"].get<bool>();
      if (c.contains("enable_thinking")) r.extra["enable_thinking"] = c["enable_thinking"];
      const std::string text = qwen_template().render(r);
      BOOST_TEST(text == c["text"].get<std::string>());
      BOOST_TEST(qwen().encode(text) == c["ids"].get<std::vector<int32_t>>(), boost::test_tools::per_element());
    }
  }
  chat_request both;
  both.messages = ojson::array({user("x")});
  both.add_generation_prompt = both.continue_final_message = true;
  expect_error([&] { (void)qwen_template().render(both); }, errc::invalid_input, "cannot both be set");
  expect_error([&] { (void)qwen_template().render_continuing(ojson::array(), nullptr); }, errc::invalid_input,
               "the conversation is empty");
  // A template that drops the message's text cannot be continued.
  const chat_template drops("{% for m in messages %}[{{ m.role }}]{% if false %}{{ m.content }}{% endif %}{% endfor %}");
  expect_error([&] { (void)drops.render_continuing(ojson::array({user("x")}), nullptr); }, errc::invalid_input,
               "does not appear in the chat");
  const chat_template blind("{% for m in messages %}[{{ m.role }}]{% endfor %}");
  expect_error([&] { (void)blind.render_continuing(ojson::array({user("x")}), nullptr); }, errc::invalid_input,
               "does not read \"content\"");
}

BOOST_AUTO_TEST_CASE(thinking_switch_and_generation_prompt) {
  ojson msgs = ojson::array({user("Hi")});
  BOOST_TEST(qwen_template().render(msgs, nullptr, true, {{"enable_thinking", false}}) ==
             "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  BOOST_TEST(qwen_template().render(msgs, nullptr, true, {{"enable_thinking", true}}) ==
             "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  BOOST_TEST(qwen_template().render(msgs, nullptr, false) == "<|im_start|>user\nHi<|im_end|>\n");
}

BOOST_AUTO_TEST_CASE(tool_call_arguments_keep_key_order_and_unicode) {
  ojson msgs = ojson::array(
      {user("weather?"),
       {{"role", "assistant"},
        {"content", ""},
        {"tool_calls", {{{"type", "function"}, {"function", {{"name", "get"}, {"arguments", {{"z", 1}, {"a", "Zürich \"x\""}}}}}}}}},
       {{"role", "tool"}, {"content", "{\"t\": 1.5}"}}});
  std::string text = qwen_template().render(msgs, nullptr, false);
  BOOST_TEST(text.find("<tool_call>\n{\"name\": \"get\", \"arguments\": {\"z\": 1, \"a\": \"Zürich \\\"x\\\"\"}}\n</tool_call>") !=
             std::string::npos, text);
  BOOST_TEST(text.find("<|im_start|>user\n<tool_response>\n{\"t\": 1.5}\n</tool_response><|im_end|>") != std::string::npos,
             text);
}

BOOST_AUTO_TEST_CASE(bad_conversations_are_errors_not_crashes) {
  expect_error([] { (void)qwen_template().render(ojson::object(), nullptr, false); }, errc::invalid_input,
               "\"messages\" must be an array");
  expect_error([] { (void)qwen_template().render(ojson::array({"text"}), nullptr, false); }, errc::invalid_input,
               "messages[0] must be an object");
  // The template reads messages[0].role: an empty conversation fails as it does in transformers.
  expect_error([] { (void)qwen_template().render(ojson::array(), nullptr, false); }, errc::invalid_input,
               "messages[0] is undefined (reading .role)");
  // A user message without content: the template's string concatenation fails, naming it.
  expect_error([] { (void)qwen_template().render(ojson::array({{{"role", "user"}}}), nullptr, false); },
               errc::invalid_input, "message.content is undefined");
}

BOOST_AUTO_TEST_CASE(template_sources_and_load_errors) {
  troupe::test::temp_dir d;
  d.write("tokenizer_config.json", R"({"chat_template": "{{ bos_token }}{{ messages[0].content }}", "bos_token": "<s>"})");
  chat_template t = chat_template::from_directory(d.str());
  BOOST_TEST(t.render(ojson::array({user("x")}), nullptr, false) == "<s>x");
  d.write("chat_template.jinja", "J:{{ messages|length }}\n");  // preferred, final newline dropped
  BOOST_TEST(chat_template::from_directory(d.str()).render(ojson::array({user("x")}), nullptr, false) == "J:1");

  troupe::test::temp_dir none;
  none.write("tokenizer_config.json", "{}");
  expect_error([&] { (void)chat_template::from_directory(none.str()); }, errc::unsupported, "has no chat template");
  expect_error([] { chat_template t2("{% include 'x' %}"); }, errc::unsupported,
               "chat template line 1: unsupported tag 'include'");
  expect_error([] { chat_template t2("ok\n{% if x %}"); }, errc::unsupported, "missing {% endif %}");
}

// Another template instead of the directory's (vLLM's --chat-template): a file, or the text
// itself; the directory's special tokens still reach it; neither, or a template the subset
// cannot run, is an error naming it.
BOOST_AUTO_TEST_CASE(an_override_replaces_the_directorys_template) {
  troupe::test::temp_dir d;
  d.write("tokenizer_config.json", R"({"chat_template": "model's", "eos_token": "</e>"})");
  d.write("custom.jinja", "F:{{ messages[0].content }}{{ eos_token }}");
  const std::string file = d.str() + "/custom.jinja";
  BOOST_TEST(chat_template::from_directory(d.str(), file).render(ojson::array({user("x")}), nullptr, false) == "F:x</e>");
  BOOST_TEST(chat_template::from_directory(d.str(), "I:{{ messages|length }}{{ eos_token }}")
                 .render(ojson::array({user("x")}), nullptr, false) == "I:1</e>");
  BOOST_TEST(chat_template::from_directory(d.str()).render(ojson::array({user("x")}), nullptr, false) == "model's");
  expect_error([&] { (void)chat_template::from_directory(d.str(), d.str() + "/missing.jinja"); }, errc::io_error,
               "missing.jinja' is neither a file nor a template");
  d.write("bad.jinja", "ok\n{% include 'x' %}");
  expect_error([&] { (void)chat_template::from_directory(d.str(), d.str() + "/bad.jinja"); }, errc::unsupported,
               "bad.jinja: chat template line 2: unsupported tag 'include'");
  expect_error([&] { (void)chat_template::from_directory(d.str(), "{% include 'x' %}"); }, errc::unsupported,
               "the chat template given inline: chat template line 1");
}

BOOST_AUTO_TEST_SUITE_END()
