// Beam search as vLLM serves it (`use_beam_search`, its BeamSearchParams): a loop above the engine.
// Each round every live beam asks the model for the 2 * width most likely next tokens (a one-token
// request of its prompt + beam, whose prefix the prefix cache holds: only the last partial block
// is computed again); every (beam, token) becomes a candidate scored by its cumulative
// log-probability over the sequence length to the power length_penalty; a stop id ends a
// candidate (it joins the finished ones) and the best `width` others are the next round's beams.
// After max_tokens rounds (or when no beam is left) the best `width` of the finished and the live
// beams are the answers, best first. Plain data in, data out: the tokenizer worker drives it.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace troupe::serve {

struct beam {
  std::vector<int32_t> tokens;  // generated, without the prompt (a stop id last when it ended one)
  double cum_logprob = 0;
  bool stopped = false;         // ended by a stop id
};

class beam_search {
 public:
  // width >= 1 (at most 10: 2 * width candidates come from a request's top logprobs); max_tokens
  // >= 1. stop_ids end a beam (none when ignore_eos); include_stop: the stop id stays in its tokens.
  beam_search(int64_t prompt_len, int32_t width, int32_t max_tokens, std::vector<int32_t> stop_ids,
              double length_penalty = 1.0, bool include_stop = false);

  // The beams to extend this round (empty when done()).
  const std::vector<beam>& live() const noexcept { return live_; }
  int32_t candidates_per_beam() const noexcept { return 2 * width_; }
  // The round's answers: for live()[i], its most likely next tokens as (id, logprob), most likely
  // first (any number; candidates_per_beam() are asked for).
  void advance(std::span<const std::vector<std::pair<int32_t, double>>> next);
  bool done() const noexcept { return live_.empty() || rounds_ >= max_tokens_; }
  // The answers, best first: the best `width` of the finished and live beams.
  std::vector<beam> best() const;
  // vLLM's get_beam_search_score: cum_logprob / (prompt + tokens, less a final stop id) ^ length_penalty.
  double score(const beam& b) const;

 private:
  int64_t prompt_len_;
  int32_t width_, max_tokens_;
  std::vector<int32_t> stop_ids_;
  double length_penalty_;
  bool include_stop_;
  int32_t rounds_ = 0;
  std::vector<beam> live_, finished_;
};

}  // namespace troupe::serve
