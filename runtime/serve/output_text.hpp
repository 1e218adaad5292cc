// A request's output text as it streams: ids -> whole UTF-8 characters (stream_decoder), with
// stop strings held back until they either match (the text ends before the match) or can no
// longer match (the text is released). Text sent to a client never has to be taken back.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/tokenizer/tokenizer.hpp"

namespace troupe::serve {

class output_text {
 public:
  // `tok` may be null (a model served without a tokenizer): every delta is then empty. Stop
  // strings are looked for from the min_tokens-th token on, in the text that token and later
  // ones add (vLLM's min_tokens); text before it is released as it comes. `include_stop`: the
  // text ends after the matched stop string instead of before it (vLLM's include_stop_str_in_output).
  // `skip_special`: special tokens (<|im_end|>, ...) have no text (vLLM's skip_special_tokens).
  output_text(const tokenizer* tok, std::vector<std::string> stop_strings, int32_t min_tokens = 0,
              bool include_stop = false, bool skip_special = true);

  struct delta {
    std::string text;      // safe to send now
    bool stopped = false;  // a stop string matched: `text` ends before it (or with it) and the stream is over
  };
  // An id past the tokenizer's last (a padded row of the model's vocabulary: Qwen3 checkpoints have
  // 151,936 rows for 151,669 ids) has no text, as in Hugging Face's decode: the delta is empty and
  // the stream goes on. A random-weight model samples them often (the demo model did within a
  // few tokens and failed the request). Throws troupe::error(out_of_range) for any other id the
  // tokenizer does not know (a negative one).
  delta push(int32_t id);
  // End of the stream (not stopped): everything held back, an incomplete character as U+FFFD.
  std::string finish();
  bool stopped() const noexcept { return stopped_; }

 private:
  std::optional<stream_decoder> dec_;
  size_t id_limit_ = 0;  // the tokenizer's id_limit()
  std::vector<std::string> stop_;
  std::string held_;
  int64_t min_tokens_ = 0;
  bool include_stop_ = false;
  int64_t pushed_ = 0;  // ids pushed so far
  bool stopped_ = false;
};

}  // namespace troupe::serve
