// One prompt's beam search as a tokenizer worker runs it (vLLM's loop above the engine): every
// round, one probe per live beam (a one-token greedy request of the prompt and that beam, asking
// for the 2 * width most likely tokens' logprobs, its prefix mostly in the prefix cache); when
// all have answered the search advances; at the end its best beams become the request's n
// completions. The worker submits the probes and writes the completions; this holds the rest.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "runtime/sampling/logprobs.hpp"
#include "runtime/serve/beam_search.hpp"
#include "runtime/serve/request_builder.hpp"

namespace troupe::serve {

class beam_request {
 public:
  // br: the prompt as built (its stop ids end beams, its max_tokens bounds the rounds); width:
  // the request's n.
  beam_request(built_request br, int32_t width, double length_penalty, bool include_stop);

  // The prompts of this round's probes (the prompt, then live beam i's tokens); empty once done().
  std::vector<std::vector<int32_t>> probes() const;
  // The sampling of every probe: greedy, logprobs of the candidates_per_beam() most likely tokens.
  sampling_params probe_sampling() const;
  int32_t probe_logprobs() const noexcept { return search_.candidates_per_beam(); }
  // Probe i of this round answered with its token's logprobs (their `top`). True when that was
  // the round's last answer: the search advanced (probes() holds the next round, or done()).
  bool answer(size_t i, const token_logprobs& lp);
  bool done() const noexcept { return search_.done(); }
  const built_request& built() const noexcept { return br_; }
  std::vector<beam> best() const { return search_.best(); }

 private:
  built_request br_;
  beam_search search_;
  std::vector<std::optional<std::vector<std::pair<int32_t, double>>>> answers_;
};

}  // namespace troupe::serve
