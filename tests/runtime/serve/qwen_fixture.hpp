// What several serve tests share: the Qwen3 tokenizer and chat template as a server holds them,
// and the events a response wrote, decoded as a client would.
#pragma once

#include <string>
#include <vector>

#include "runtime/serve/request_builder.hpp"
#include "runtime/wire/protocol.hpp"

namespace troupe::serve::test {

const model_facts& qwen_facts();
std::vector<wire::event> events_of(const std::string& bytes);

}  // namespace troupe::serve::test
