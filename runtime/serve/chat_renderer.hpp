// The model's chat template as the server applies it to a request's messages and tools
// (always with the generation prompt: the model answers next).
#pragma once

#include <memory>

#include "runtime/serve/request_builder.hpp"
#include "runtime/tokenizer/chat_template.hpp"

namespace troupe::serve {

chat_renderer make_chat_renderer(std::shared_ptr<const chat_template> tmpl);

}  // namespace troupe::serve
