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
  // `tok` may be null (a model served without a tokenizer): every delta is then empty.
  output_text(const tokenizer* tok, std::vector<std::string> stop_strings);

  struct delta {
    std::string text;      // safe to send now
    bool stopped = false;  // a stop string matched: `text` ends before it and the stream is over
  };
  // Throws troupe::error(out_of_range) for an id the tokenizer does not know.
  delta push(int32_t id);
  // End of the stream (not stopped): everything held back, an incomplete character as U+FFFD.
  std::string finish();
  bool stopped() const noexcept { return stopped_; }

 private:
  std::optional<stream_decoder> dec_;
  std::vector<std::string> stop_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace troupe::serve
