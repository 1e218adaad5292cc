// libFuzzer harness for the chat template's Jinja engine on template text (a checkpoint's
// tokenizer_config.json or chat_template.jinja): every template must compile or be refused with
// troupe::error, and one that compiles must render a conversation with tools and tool calls, or
// refuse it with troupe::error, never crash, overrun or hang. Not part of ctest:
// tools/fuzz.sh chat_template.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/core/error.hpp"
#include "runtime/tokenizer/chat_template.hpp"

namespace {

using ojson = nlohmann::ordered_json;

const ojson& conversation() {
  static const ojson m = ojson::parse(R"([
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Weather in Paris? <|im_end|>"},
    {"role": "assistant", "content": "<think>\nlook it up\n</think>\n\n",
     "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": [1, 2]}}}]},
    {"role": "tool", "content": "{\"temp\": 21}"},
    {"role": "assistant", "content": "21 degrees."},
    {"role": "user", "content": ""}])");
  return m;
}

const ojson& tools() {
  static const ojson t = ojson::parse(R"([{"type": "function", "function": {"name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])");
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const troupe::chat_template t(std::string(reinterpret_cast<const char*>(data), size),
                                  ojson{{"eos_token", "<|im_end|>"}, {"bos_token", nullptr}});
    t.render(conversation(), tools(), true, ojson{{"enable_thinking", false}});
    t.render(conversation(), nullptr, false);
  } catch (const troupe::error&) {
    // refused with a message
  }
  return 0;
}
