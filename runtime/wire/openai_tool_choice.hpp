// OpenAI's forced tool calls on /v1/chat/completions, as vLLM serves them: `tool_choice` naming a
// function, or "required". The model's output is constrained (structured output) to JSON that
// is the call: the named function's `parameters` schema, or for "required" an array of one or
// more {"name", "parameters"} objects, one of the offered functions each. The response then
// carries the calls as tool_calls, not as content. (Agent frameworks ask for this: LangChain's
// with_structured_output names a function.)
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "runtime/wire/protocol.hpp"

namespace troupe::wire::openai {

struct forced_tool_choice {
  enum class kind : uint8_t { named, required } k = kind::named;
  std::string name;  // named: the function
};

// `choice` (tool_choice's value, not "auto" or "none") against `tools` (the body's tools, or null
// when absent): the forced choice, and in `schema` the JSON schema the output must follow.
// `parallel`: parallel_tool_calls (OpenAI's; false: "required" makes exactly one call).
// Throws detail::refusal naming the field: a malformed choice, a name no tool has, no tools.
forced_tool_choice parse_forced_tool_choice(const nlohmann::ordered_json& choice, const nlohmann::ordered_json& tools,
                                            bool parallel, nlohmann::ordered_json& schema);

// The calls a forced output makes: named, one call whose arguments are the text; required, one
// per element of the array (its parameters as JSON text). Empty when the text is not that JSON
// (the output was cut short by max_tokens).
std::vector<tool_call> forced_tool_calls(const forced_tool_choice& c, const std::string& text);

}  // namespace troupe::wire::openai
