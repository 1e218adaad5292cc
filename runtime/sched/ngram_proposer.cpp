#include "runtime/sched/ngram_proposer.hpp"

#include <algorithm>

namespace troupe::sched {

std::vector<int32_t> propose_ngram_drafts(std::span<const int32_t> tokens, const ngram_options& opt,
                                          int32_t max_drafts) {
  const auto len = static_cast<int64_t>(tokens.size());
  const int64_t want = std::min<int64_t>(max_drafts, opt.num_tokens);
  if (want <= 0) return {};
  for (int64_t n = std::min<int64_t>(opt.max_n, len - 1); n >= std::max<int64_t>(opt.min_n, 1); --n) {
    const auto suffix = tokens.subspan(static_cast<size_t>(len - n));
    // The most recent earlier occurrence: in a loop or a repeated passage the latest copy is the
    // one the text is most likely following. Occurrences end before the suffix itself starts
    // being compared with itself (start < len - n).
    for (int64_t start = len - n - 1; start >= 0; --start) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + start)) continue;
      // Copy what followed; past the end the copy reads its own output, so a recent match (a
      // loop of period len - from) continues the loop for all `want` tokens.
      std::vector<int32_t> drafts;
      drafts.reserve(static_cast<size_t>(want));
      for (int64_t i = start + n; static_cast<int64_t>(drafts.size()) < want; ++i)
        drafts.push_back(i < len ? tokens[static_cast<size_t>(i)] : drafts[static_cast<size_t>(i - len)]);
      return drafts;
    }
  }
  return {};
}

}  // namespace troupe::sched
