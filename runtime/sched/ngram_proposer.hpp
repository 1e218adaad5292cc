// Draft tokens for speculative decoding by prompt lookup (vLLM's `ngram` method, llama.cpp's
// lookup decoding): when a sequence's last n tokens appeared before in its own prompt or output,
// the tokens that followed them then are guessed to follow now. Costs no model; the verifying
// step computes the guesses beside the real token, and wins when the text repeats itself (code
// edits, quoting the prompt, JSON keys, loops).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace troupe::sched {

struct ngram_options {
  int32_t num_tokens = 0;  // drafts per step at most; 0: speculative decoding off
  int32_t min_n = 2;       // shortest suffix that may match (1 guesses too often on real text)
  int32_t max_n = 4;       // longest suffix tried first
};

// min(max_drafts, num_tokens) tokens that followed the most recent earlier occurrence of the
// longest suffix of `tokens` (max_n down to min_n tokens long) that occurs earlier, continued
// periodically when that occurrence is recent (a loop); empty when no suffix occurs earlier.
std::vector<int32_t> propose_ngram_drafts(std::span<const int32_t> tokens, const ngram_options& opt,
                                          int32_t max_drafts);

}  // namespace troupe::sched
