// Qwen3's reasoning, apart from its answer: the model thinks inside <think>...</think> and then
// answers. A request with `separate_reasoning` gets the two as separate streams, as vLLM's
// `qwen3` reasoning parser gives `reasoning_content` and `content`; the tags themselves are in
// neither. Works on text (not ids), after stop strings, so the streams never take text back.
//
// The rule (vLLM's, and the chat template's own when it re-reads a turn):
// - output "<think>R</think>C": reasoning R, content C;
// - the prompt already opened the block (Qwen3-Thinking-2507's template ends with "<think>\n"),
//   output "R</think>C": the same;
// - no block (enable_thinking=false puts an empty one in the prompt): all content;
// - a block never closed (max_tokens cut the thinking short): all reasoning.
// Newlines next to the tags are dropped as the template drops them (reasoning.strip("\n"),
// content.lstrip("\n")), so a client that sends the turn back renders the same prompt.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "runtime/tokenizer/tokenizer.hpp"

namespace troupe::serve {

class reasoning_split {
 public:
  // opened_in_prompt: the prompt ends inside a think block (prompt_opens_reasoning).
  explicit reasoning_split(bool opened_in_prompt);

  struct parts {
    std::string reasoning;
    std::string content;
  };
  // Takes the next piece of output text; returns what is safe to send of each. A tail that may
  // be the start of a tag (or newlines that may precede "</think>") is held back.
  parts push(std::string_view text);
  // End of output: what was held back, in the stream it belongs to.
  parts finish();

 private:
  enum class state { expect_open, reasoning, content };
  state state_;
  bool strip_leading_newlines_;
  std::string held_;
};

// Whether the prompt ends inside an open <think> block (its text ends with "<think>" and
// whitespace at most).
bool prompt_opens_reasoning(const tokenizer& tok, std::span<const int32_t> prompt);
// Whether it ends with a closed think block ("<think>\n\n</think>\n\n": Qwen3's template with
// enable_thinking=false): the answer comes next, no think block may open.
bool prompt_closes_reasoning(const tokenizer& tok, std::span<const int32_t> prompt);

}  // namespace troupe::serve
