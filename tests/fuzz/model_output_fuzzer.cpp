// libFuzzer harness for what the server reads out of model output, which a prompt can steer:
// the tool-call parsers (hermes JSON, and Qwen3-Coder's XML with values typed by a schema) must
// take any text without crashing, every call's arguments JSON; streamed tool calls
// (wire::tool_call_stream) must give the same content, calls and arguments however the text is cut;
// and the reasoning split must give the
// same reasoning and content however the text is streamed to it (the whole at once, or in pieces
// of 1-8 bytes chosen by the first byte), as a client streaming the reply would see it. Not part
// of ctest: tools/fuzz.sh model_output.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/serve/reasoning_split.hpp"
#include "runtime/serve/tool_calls.hpp"
#include "runtime/wire/tool_call_stream.hpp"

namespace {

troupe::serve::reasoning_split::parts split(std::string_view text, bool opened, size_t piece) {
  troupe::serve::reasoning_split s(opened);
  troupe::serve::reasoning_split::parts all;
  auto add = [&](const troupe::serve::reasoning_split::parts& p) {
    all.reasoning += p.reasoning;
    all.content += p.content;
  };
  for (size_t i = 0; i < text.size(); i += piece) add(s.push(text.substr(i, piece)));
  add(s.finish());
  return all;
}

struct streamed_calls {
  std::string content;
  std::vector<std::string> names, arguments;
  size_t complete = 0;
  bool operator==(const streamed_calls&) const = default;
};

streamed_calls stream_calls(std::string_view text, size_t piece) {
  troupe::wire::tool_call_stream s;
  streamed_calls out;
  for (size_t i = 0; i < text.size(); i += piece) {
    auto p = s.push(text.substr(i, piece));
    out.content += p.content;
    for (auto& c : p.calls) {
      if (c.begins) {
        if (c.index != out.names.size()) std::abort();
        out.names.push_back(c.name);
        out.arguments.emplace_back();
      }
      if (c.index >= out.arguments.size()) std::abort();
      out.arguments[c.index] += c.arguments;
    }
  }
  out.complete = s.complete();
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool opened = data[0] & 1;
  const size_t piece = 1 + (data[0] >> 1) % 8;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  troupe::serve::parse_tool_calls(text);
  static const std::string tools =
      R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"i": {"type": "integer"},
      "n": {"type": "number"}, "b": {"type": "boolean"}, "o": {"type": "object"}, "a": {"type": "array"}, "s": {"type": "string"}}}}}])";
  for (const auto& c : troupe::serve::parse_tool_calls(text, troupe::serve::tool_call_format::qwen3_coder, tools))
    if (!nlohmann::json::accept(c.arguments)) {
      std::fprintf(stderr, "qwen3_coder call arguments are not JSON: %s\n", c.arguments.c_str());
      std::abort();
    }
  const auto calls_whole = stream_calls(text, text.size() + 1), calls_pieces = stream_calls(text, piece);
  if (!(calls_whole == calls_pieces)) {
    std::fprintf(stderr, "streamed tool calls differ when streamed in pieces of %zu bytes\n", piece);
    std::abort();
  }
  const auto whole = split(text, opened, text.size() + 1), pieces = split(text, opened, piece);
  if (whole.reasoning != pieces.reasoning || whole.content != pieces.content) {
    std::fprintf(stderr, "reasoning split differs when streamed in pieces of %zu bytes\n", piece);
    std::abort();
  }
  return 0;
}
