// vLLM's thinking_token_budget: a sequence may think (inside Qwen3's <think> ... </think>) for at
// most that many tokens; the next one is then </think>, forced, and the model goes on to answer.
// It reads the output the sampler is given, so it holds no state the output does not imply: it
// only remembers how far it has read (a shorter output than before, a rebuilt sequence, reads
// again from the start).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "runtime/sampling/sampler.hpp"

namespace troupe::sampling_detail {

class thinking_budget {
 public:
  // p.thinking_token_budget >= 0 and p.think_end_id >= 0 (validate() checks).
  explicit thinking_budget(const sampling_params& p);
  // The token that must come after `output`: </think> once the open think block holds `budget`
  // tokens; nullopt while thinking is within budget, before a block opens, or after it closed.
  std::optional<int32_t> forced(std::span<const int32_t> output);

 private:
  int32_t budget_, start_id_, end_id_;
  bool opened_in_prompt_;
  size_t read_ = 0;       // output tokens read so far
  int64_t first_ = -1;    // index of the block's first thinking token (0 when the prompt opened it)
  bool closed_ = false;   // </think> came
};

}  // namespace troupe::sampling_detail
