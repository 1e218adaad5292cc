#include "runtime/sched/ngram_proposer.hpp"

#include <algorithm>

namespace troupe::sched {

std::vector<int32_t> propose_ngram_drafts(std::span<const int32_t> tokens, const ngram_options& opt,
                                          int32_t max_drafts) {
  const auto len = static_cast<int64_t>(tokens.size());
  const int64_t want = std::min<int64_t>(max_drafts, opt.num_tokens);
  const int64_t min_n = std::max<int64_t>(opt.min_n, 1), max_n = std::min<int64_t>(opt.max_n, len - 1);
  if (want <= 0 || max_n < min_n) return {};
  // One backward pass over the earlier positions that hold the last token: each is the end of an
  // occurrence of the suffix of some length (how far the match runs back, capped at max_n). The
  // longest wins; among equals the most recent, which in a loop or a repeated passage is the copy
  // the text is most likely following. A full-length match ends the search at once.
  const int32_t last = tokens[static_cast<size_t>(len - 1)];
  int64_t best_end = -1, best_n = min_n - 1;
  for (int64_t end = len - 2; end >= 0 && best_n < max_n; --end) {
    if (tokens[static_cast<size_t>(end)] != last) continue;
    int64_t n = 1;
    while (n < max_n && n <= end && tokens[static_cast<size_t>(end - n)] == tokens[static_cast<size_t>(len - 1 - n)]) ++n;
    if (n > best_n) {
      best_n = n;
      best_end = end;
    }
  }
  if (best_end < 0) return {};
  // Copy what followed; past the end the copy reads its own output, so a recent match (a loop of
  // period len - 1 - best_end) continues the loop for all `want` tokens.
  std::vector<int32_t> drafts;
  drafts.reserve(static_cast<size_t>(want));
  for (int64_t i = best_end + 1; static_cast<int64_t>(drafts.size()) < want; ++i)
    drafts.push_back(i < len ? tokens[static_cast<size_t>(i)] : drafts[static_cast<size_t>(i - len)]);
  return drafts;
}

}  // namespace troupe::sched
