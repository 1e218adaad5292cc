// The tool calls in a completion, in the format the model's chat template teaches:
// - hermes (Qwen3, as vLLM's "hermes" parser reads it): each
//   <tool_call>{"name": ..., "arguments": {...}}</tool_call> block in order;
// - qwen3_coder (Qwen3-Coder, as vLLM's "qwen3_coder" parser reads it): each
//   <tool_call><function=NAME><parameter=P>VALUE</parameter>...</function></tool_call> block, every
//   value typed by the offered tool's schema for P (a string unless it says integer, number,
//   boolean, object or array; "null" is null).
// A last block left open when generation stopped counts too. As vLLM does, one malformed block
// means no calls at all: the client then has the text to read, and never a partial list that
// looks complete.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "runtime/wire/protocol.hpp"

namespace troupe::serve {

enum class tool_call_format : uint8_t { hermes, qwen3_coder };
const char* to_string(tool_call_format f) noexcept;

// [model] tool_call_parser "auto": qwen3_coder when the chat template teaches Qwen3-Coder's XML
// calls (it prints "<parameter="), else hermes.
tool_call_format tool_call_format_for(std::string_view chat_template_source);

std::vector<wire::tool_call> parse_tool_calls(std::string_view text);  // hermes
// `tools_json`: the request's tools (OpenAI's form), whose schemas type qwen3_coder's values.
std::vector<wire::tool_call> parse_tool_calls(std::string_view text, tool_call_format f, std::string_view tools_json);

}  // namespace troupe::serve
