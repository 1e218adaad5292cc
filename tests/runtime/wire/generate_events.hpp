// A generate's events as the Responses and background-response tests feed them: one token (its
// text, or Qwen3's thinking, and a logprob of -0.5 * id), and the done event.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "runtime/wire/protocol.hpp"

namespace troupe::test {

inline wire::token_event tok(int32_t id, std::string text, std::string reasoning = {}) {
  wire::token_event t;
  t.id = "x";
  t.text = std::move(text);
  if (!reasoning.empty()) t.reasoning = std::move(reasoning);
  t.ids = {id};
  t.logprobs = wire::logprob_info{-0.5 * id, {{id, -0.5 * id}}};
  return t;
}

// Prompt 9 tokens (3 cached), 6 generated.
inline wire::done_event done(wire::finish_reason r) {
  wire::done_event d;
  d.reason = r;
  d.usage = {9, 3, 6};
  return d;
}

}  // namespace troupe::test
