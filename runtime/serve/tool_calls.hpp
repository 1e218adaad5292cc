// The tool calls in a completion, as vLLM's "hermes" parser reads Qwen3's output: each
// <tool_call>{"name": ..., "arguments": {...}}</tool_call> block in order (a last block left open
// when generation stopped counts too). As vLLM does, one malformed block means no calls at all:
// the client then has the text to read, and never a partial list that looks complete.
#pragma once

#include <string_view>
#include <vector>

#include "runtime/wire/protocol.hpp"

namespace troupe::serve {

std::vector<wire::tool_call> parse_tool_calls(std::string_view text);

}  // namespace troupe::serve
