#include "runtime/wire/openai_tool_choice.hpp"

#include "runtime/wire/openai_detail.hpp"

namespace troupe::wire::openai {

using detail::ojson;
using detail::refuse;

namespace {

// A function's parameters schema; none: an object with no properties, as vLLM takes it.
ojson parameters_of(const ojson& fn) {
  auto p = fn.find("parameters");
  if (p == fn.end() || p->is_null()) return {{"type", "object"}, {"properties", ojson::object()}};
  return *p;
}

const ojson* function_of(const ojson& tool) {
  if (!tool.is_object()) return nullptr;
  auto f = tool.find("function");
  return f != tool.end() && f->is_object() && f->contains("name") && (*f)["name"].is_string() ? &*f : nullptr;
}

}  // namespace

forced_tool_choice parse_forced_tool_choice(const ojson& choice, const ojson& tools, bool parallel, ojson& schema) {
  forced_tool_choice c;
  if (!tools.is_array() || tools.empty())
    refuse("invalid_value", "tool_choice", "tool_choice forces a tool call but the request offers no tools");
  if (choice == "required") {
    // vLLM's schema: an array of one or more calls, each one of the offered functions.
    c.k = forced_tool_choice::kind::required;
    ojson any = ojson::array();
    for (size_t i = 0; i < tools.size(); ++i) {
      const ojson* fn = function_of(tools[i]);
      if (!fn) refuse("invalid_value", "tools[" + std::to_string(i) + "]", "each tool needs function.name");
      any.push_back({{"type", "object"},
                     {"properties", {{"name", {{"type", "string"}, {"enum", ojson::array({(*fn)["name"]})}}},
                                     {"parameters", parameters_of(*fn)}}},
                     {"required", ojson::array({"name", "parameters"})}});
    }
    schema = {{"type", "array"}, {"minItems", 1}, {"items", {{"anyOf", any}}}};
    if (!parallel) schema["maxItems"] = 1;
    return c;
  }
  if (!choice.is_object() || choice.value("type", ojson()) != "function" || !choice.contains("function") ||
      !choice["function"].is_object() || !choice["function"].contains("name") || !choice["function"]["name"].is_string())
    refuse("invalid_value", "tool_choice",
           "tool_choice must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}");
  c.name = choice["function"]["name"].get<std::string>();
  for (const auto& t : tools)
    if (const ojson* fn = function_of(t); fn && (*fn)["name"] == c.name) {
      schema = parameters_of(*fn);
      return c;
    }
  refuse("invalid_value", "tool_choice", "tool_choice names function '" + c.name + "', which is not among the tools");
}

std::vector<tool_call> forced_tool_calls(const forced_tool_choice& c, const std::string& text) {
  std::vector<tool_call> calls;
  ojson j;
  try {
    j = ojson::parse(text);
  } catch (const ojson::exception&) {
    return calls;  // cut short: not JSON
  }
  if (c.k == forced_tool_choice::kind::named) {
    calls.push_back({c.name, text});
    return calls;
  }
  if (!j.is_array()) return calls;
  for (const auto& e : j) {
    if (!e.is_object() || !e.contains("name") || !e["name"].is_string() || !e.contains("parameters")) return {};
    calls.push_back({e["name"].get<std::string>(), detail::dump(e["parameters"])});
  }
  return calls;
}

}  // namespace troupe::wire::openai
