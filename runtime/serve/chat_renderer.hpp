// The model's chat template as the server applies it to a request's messages and tools
// (always with the generation prompt: the model answers next).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "runtime/serve/request_builder.hpp"
#include "runtime/tokenizer/chat_template.hpp"

namespace troupe::serve {

// The server's default_chat_template_kwargs (vLLM's --default-chat-template-kwargs), read once:
// enable_thinking (Qwen3's switch: model_facts::default_enable_thinking) and the other template
// variables every chat request gets unless it gives its own.
struct template_defaults {
  bool enable_thinking = true;
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
};
// `json`: "" (none) or a JSON object. Throws troupe::error(invalid_argument) naming
// model.default_chat_template_kwargs: not an object, enable_thinking not a boolean, or a name the
// request's own fields set (messages, tools, ...).
template_defaults parse_template_defaults(const std::string& json);

// Renders with `tmpl`: the template variables are `defaults`, then the request's
// chat_template_kwargs over them, then enable_thinking (chat_options).
chat_renderer make_chat_renderer(std::shared_ptr<const chat_template> tmpl,
                                 nlohmann::ordered_json defaults = nlohmann::ordered_json::object());

}  // namespace troupe::serve
