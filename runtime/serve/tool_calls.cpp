#include "runtime/serve/tool_calls.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "runtime/core/json_in_order.hpp"

namespace troupe::serve {

namespace {

using ojson = nlohmann::ordered_json;

constexpr std::string_view open_tag = "<tool_call>";
constexpr std::string_view close_tag = "</tool_call>";

// Each <tool_call> block's body, in order (the last one may be unclosed).
std::vector<std::string_view> call_blocks(std::string_view text) {
  std::vector<std::string_view> out;
  for (size_t at = text.find(open_tag); at != std::string_view::npos; at = text.find(open_tag, at)) {
    const size_t body = at + open_tag.size();
    const size_t end = text.find(close_tag, body);
    out.push_back(text.substr(body, end == std::string_view::npos ? text.npos : end - body));
    at = end == std::string_view::npos ? text.size() : end + close_tag.size();
  }
  return out;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// The schema's type of each parameter of function `name` among `tools` ("" when the tool or the
// parameter is not there, or its type is not a string).
std::string param_type(const ojson& tools, std::string_view name, const std::string& param) {
  if (!tools.is_array()) return {};
  for (const auto& t : tools) {
    const ojson& f = t.contains("function") ? t["function"] : t;
    if (!f.is_object() || f.value("name", std::string()) != name) continue;
    const auto p = f.find("parameters");
    if (p == f.end() || !p->is_object()) return {};
    const auto props = p->find("properties");
    if (props == p->end() || !props->is_object()) return {};
    const auto s = props->find(param);
    if (s == props->end() || !s->is_object()) return {};
    const auto ty = s->find("type");
    return ty != s->end() && ty->is_string() ? lower(ty->get<std::string>()) : std::string();
  }
  return {};
}

// A parameter's text as the JSON value its schema type says (vLLM's qwen3_coder conversions); the
// text itself when it does not read as that type or the type is unknown.
ojson typed_value(const std::string& text, const std::string& type) {
  if (lower(text) == "null") return nullptr;
  if (type.empty() || type == "string" || type == "str" || type == "text" || type == "varchar" || type == "char" ||
      type == "enum")
    return text;
  if (starts_with(type, "int") || starts_with(type, "uint") || starts_with(type, "long") || starts_with(type, "short") ||
      starts_with(type, "unsigned")) {
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(text.c_str(), &end, 10);
    if (!text.empty() && end == text.c_str() + text.size() && errno == 0) return v;
    return text;
  }
  if (starts_with(type, "num") || starts_with(type, "float")) {
    errno = 0;
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size() || errno != 0 || !std::isfinite(v)) return text;
    if (v == std::trunc(v) && std::fabs(v) < 9.0e15) return static_cast<long long>(v);  // 3.0 -> 3, as vLLM
    return v;
  }
  if (type == "boolean" || type == "bool" || type == "binary") return lower(text) == "true";
  // object, array and anything else: JSON when it is JSON.
  const auto j = ojson::parse(text, nullptr, /*allow_exceptions=*/false);
  return j.is_discarded() ? ojson(text) : j;
}

// One <function=NAME>...</function> body (after "<function="): the call, or false if malformed.
bool parse_function(std::string_view f, const ojson& tools, wire::tool_call& call) {
  const size_t gt = f.find('>');
  if (gt == std::string_view::npos || gt == 0) return false;
  const std::string_view name = f.substr(0, gt);
  if (name.find_first_of("<\n") != std::string_view::npos) return false;
  call.name = std::string(name);
  ojson args = ojson::object();
  std::string_view rest = f.substr(gt + 1);
  constexpr std::string_view p_open = "<parameter=", p_close = "</parameter>";
  for (size_t at = rest.find(p_open); at != std::string_view::npos; at = rest.find(p_open, at)) {
    const size_t name_at = at + p_open.size();
    const size_t pgt = rest.find('>', name_at);
    if (pgt == std::string_view::npos) return false;
    const std::string param(rest.substr(name_at, pgt - name_at));
    // The value runs to </parameter>, or to the next parameter or the function's end.
    size_t end = std::min({rest.find(p_close, pgt), rest.find(p_open, pgt), rest.size()});
    std::string value(rest.substr(pgt + 1, end - pgt - 1));
    if (!value.empty() && value.front() == '\n') value.erase(0, 1);
    if (!value.empty() && value.back() == '\n') value.pop_back();
    args[param] = typed_value(value, param_type(tools, call.name, param));
    at = end;
  }
  call.arguments = args.dump(-1, ' ', false, ojson::error_handler_t::replace);
  return true;
}

std::vector<wire::tool_call> parse_coder_calls(std::string_view text, std::string_view tools_json) {
  ojson tools;
  if (!tools_json.empty()) {
    try {
      tools = parse_json_in_order(tools_json);
    } catch (const std::exception&) {  // the decoder checked it; a schema-less parse then
    }
  }
  constexpr std::string_view f_open = "<function=", f_close = "</function>";
  std::vector<wire::tool_call> calls;
  for (std::string_view block : call_blocks(text)) {
    size_t at = block.find(f_open);
    if (at == std::string_view::npos) return {};
    for (; at != std::string_view::npos; at = block.find(f_open, at)) {
      const size_t body = at + f_open.size();
      const size_t end = std::min(block.find(f_close, body), block.find(f_open, body));
      wire::tool_call c;
      if (!parse_function(block.substr(body, end == std::string_view::npos ? block.npos : end - body), tools, c))
        return {};
      calls.push_back(std::move(c));
      at = end == std::string_view::npos ? block.size() : end;
    }
  }
  return calls;
}

}  // namespace

const char* to_string(tool_call_format f) noexcept { return f == tool_call_format::qwen3_coder ? "qwen3_coder" : "hermes"; }

tool_call_format tool_call_format_for(std::string_view chat_template_source) {
  return chat_template_source.find("<parameter=") != std::string_view::npos ? tool_call_format::qwen3_coder
                                                                             : tool_call_format::hermes;
}

std::vector<wire::tool_call> parse_tool_calls(std::string_view text) {
  std::vector<wire::tool_call> calls;
  for (std::string_view json_text : call_blocks(text)) {
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

std::vector<wire::tool_call> parse_tool_calls(std::string_view text, tool_call_format f, std::string_view tools_json) {
  return f == tool_call_format::qwen3_coder ? parse_coder_calls(text, tools_json) : parse_tool_calls(text);
}

}  // namespace troupe::serve
