#include "runtime/serve/tool_calls.hpp"

#include <nlohmann/json.hpp>

namespace troupe::serve {

namespace {
constexpr std::string_view open_tag = "<tool_call>";
constexpr std::string_view close_tag = "</tool_call>";
}  // namespace

std::vector<wire::tool_call> parse_tool_calls(std::string_view text) {
  std::vector<wire::tool_call> calls;
  for (size_t at = text.find(open_tag); at != std::string_view::npos; at = text.find(open_tag, at)) {
    const size_t body = at + open_tag.size();
    const size_t end = text.find(close_tag, body);
    const std::string_view json_text = text.substr(body, end == std::string_view::npos ? text.npos : end - body);
    at = end == std::string_view::npos ? text.size() : end + close_tag.size();
    const auto j = nlohmann::ordered_json::parse(json_text, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return {};
    wire::tool_call c;
    c.name = j["name"].get<std::string>();
    if (!j.contains("arguments")) {
      c.arguments = "{}";
    } else if (j["arguments"].is_string()) {
      c.arguments = j["arguments"].get<std::string>();  // already JSON text, as OpenAI carries it
    } else if (j["arguments"].is_object()) {
      c.arguments = j["arguments"].dump();
    } else {
      return {};
    }
    calls.push_back(std::move(c));
  }
  return calls;
}

}  // namespace troupe::serve
