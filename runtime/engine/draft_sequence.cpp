#include "runtime/engine/draft_sequence.hpp"

#include <algorithm>
#include <numeric>

#include "runtime/core/error.hpp"

namespace troupe {

namespace {
constexpr int32_t kBlockSize = 16;
}  // namespace

int32_t draft_guess(std::span<const float> row, int64_t target_vocab_size) {
  const auto n = std::min<int64_t>(target_vocab_size, static_cast<int64_t>(row.size()));
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (row[static_cast<size_t>(i)] > row[static_cast<size_t>(best)]) best = i;
  return static_cast<int32_t>(best);
}

draft_sequence::draft_sequence(const checkpoint& draft, int64_t max_len, int64_t target_vocab_size, int32_t num_tokens)
    : kv_(draft.config, static_cast<int32_t>(std::max<int64_t>(1, (max_len + kBlockSize - 1) / kBlockSize)), kBlockSize),
      runner_(draft, kv_),
      table_(static_cast<size_t>(kv_.num_blocks())),
      target_vocab_(target_vocab_size),
      num_tokens_(num_tokens) {
  std::iota(table_.begin(), table_.end(), 0);
}

std::vector<int32_t> draft_sequence::propose(std::span<const int32_t> context, int32_t max_drafts) {
  const int64_t room = int64_t{kv_.num_blocks()} * kBlockSize;
  const int32_t k = std::min(num_tokens_, max_drafts);
  std::vector<int32_t> out;
  if (k <= 0 || context.empty() || static_cast<int64_t>(context.size()) + k - 1 > room) return out;
  // Keep the longest prefix held; the last context token is fed again at least, for its logits.
  size_t common = 0;
  while (common < held_.size() && common + 1 < context.size() && held_[common] == context[common]) ++common;
  held_.assign(context.begin(), context.end());
  step_sequence sq{0, context.subspan(common), static_cast<int32_t>(common), table_, logits_mode::last, -1};
  runner_.step(std::span<const step_sequence>(&sq, 1), res_);
  out.reserve(static_cast<size_t>(k));
  out.push_back(draft_guess(res_.row(0), target_vocab_));
  while (static_cast<int32_t>(out.size()) < k) {
    held_.push_back(out.back());
    sq = step_sequence{0, std::span<const int32_t>(&held_.back(), 1), static_cast<int32_t>(held_.size() - 1), table_,
                       logits_mode::last, -1};
    runner_.step(std::span<const step_sequence>(&sq, 1), res_);
    out.push_back(draft_guess(res_.row(0), target_vocab_));
  }
  return out;
}

}  // namespace troupe
