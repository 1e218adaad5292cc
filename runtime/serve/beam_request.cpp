#include "runtime/serve/beam_request.hpp"

#include <algorithm>

#include "runtime/core/error.hpp"

namespace troupe::serve {

beam_request::beam_request(built_request br, int32_t width, double length_penalty, bool include_stop)
    : br_(std::move(br)),
      search_(static_cast<int64_t>(br_.prompt.size()), width, std::max(br_.max_tokens, 1), br_.stop_ids, length_penalty,
              include_stop) {
  answers_.resize(search_.live().size());
}

std::vector<std::vector<int32_t>> beam_request::probes() const {
  std::vector<std::vector<int32_t>> out;
  if (search_.done()) return out;
  for (const auto& b : search_.live()) {
    auto p = br_.prompt;
    p.insert(p.end(), b.tokens.begin(), b.tokens.end());
    out.push_back(std::move(p));
  }
  return out;
}

sampling_params beam_request::probe_sampling() const {
  sampling_params s = br_.sampling;
  s.temperature = 0;  // the probe's own token is the most likely one; the candidates are its top logprobs
  s.min_tokens = 0;
  s.ignore_eos = true;  // the one token may be a stop id: it ends a beam here, not the probe
  s.grammar = nullptr;
  return s;
}

bool beam_request::answer(size_t i, const token_logprobs& lp) {
  TROUPE_ASSERT(i < answers_.size() && !answers_[i]);
  answers_[i] = lp.top;
  if (std::any_of(answers_.begin(), answers_.end(), [](const auto& a) { return !a.has_value(); })) return false;
  std::vector<std::vector<std::pair<int32_t, double>>> next;
  next.reserve(answers_.size());
  for (auto& a : answers_) next.push_back(std::move(*a));
  search_.advance(next);
  answers_.assign(search_.done() ? 0 : search_.live().size(), std::nullopt);
  return true;
}

}  // namespace troupe::serve
