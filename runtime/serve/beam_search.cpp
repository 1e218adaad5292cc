#include "runtime/serve/beam_search.hpp"

#include <algorithm>
#include <cmath>

#include "runtime/core/error.hpp"

namespace troupe::serve {

beam_search::beam_search(int64_t prompt_len, int32_t width, int32_t max_tokens, std::vector<int32_t> stop_ids,
                         double length_penalty, bool include_stop)
    : prompt_len_(prompt_len),
      width_(width),
      max_tokens_(max_tokens),
      stop_ids_(std::move(stop_ids)),
      length_penalty_(length_penalty),
      include_stop_(include_stop) {
  TROUPE_ASSERT(width >= 1 && max_tokens >= 1 && prompt_len >= 1);
  live_.push_back(beam{});
}

double beam_search::score(const beam& b) const {
  auto len = static_cast<double>(prompt_len_ + static_cast<int64_t>(b.tokens.size()));
  if (b.stopped && include_stop_) len -= 1;
  return b.cum_logprob / std::pow(std::max(len, 1.0), length_penalty_);
}

void beam_search::advance(std::span<const std::vector<std::pair<int32_t, double>>> next) {
  TROUPE_ASSERT(!done() && next.size() == live_.size());
  std::vector<beam> grown;
  for (size_t i = 0; i < live_.size(); ++i)
    for (const auto& [id, lp] : next[i]) {
      beam b{live_[i].tokens, live_[i].cum_logprob + lp, false};
      if (std::find(stop_ids_.begin(), stop_ids_.end(), id) != stop_ids_.end()) {
        b.stopped = true;
        if (include_stop_) b.tokens.push_back(id);
        finished_.push_back(std::move(b));
      } else {
        b.tokens.push_back(id);
        grown.push_back(std::move(b));
      }
    }
  // Best first; equal scores keep the order they came in (beam, then the token's rank), as
  // Python's stable sort does in vLLM.
  std::stable_sort(grown.begin(), grown.end(), [&](const beam& a, const beam& b) { return score(a) > score(b); });
  if (grown.size() > static_cast<size_t>(width_)) grown.resize(static_cast<size_t>(width_));
  live_ = std::move(grown);
  ++rounds_;
}

std::vector<beam> beam_search::best() const {
  std::vector<beam> all = finished_;
  all.insert(all.end(), live_.begin(), live_.end());
  std::stable_sort(all.begin(), all.end(), [&](const beam& a, const beam& b) { return score(a) > score(b); });
  if (all.size() > static_cast<size_t>(width_)) all.resize(static_cast<size_t>(width_));
  return all;
}

}  // namespace troupe::serve
