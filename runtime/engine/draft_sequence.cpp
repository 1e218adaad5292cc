#include "runtime/engine/draft_sequence.hpp"

#include <algorithm>

#include "runtime/core/error.hpp"
#include "runtime/sampling/row.hpp"

namespace troupe {

int32_t draft_guess(std::span<const float> row, int64_t target_vocab_size) {
  const auto ids = row.first(static_cast<size_t>(std::min<int64_t>(target_vocab_size, static_cast<int64_t>(row.size()))));
  return sampling_detail::argmax(ids, sampling_detail::checked_max(ids));  // the sampler's greedy pick
}

std::string draft_model_problem(const checkpoint& draft, const checkpoint& model) {
  const auto &dc = draft.config, &mc = model.config;
  if (draft.no_lm_head) return "has no lm_head (an embedding model) and cannot guess tokens";
  if (dc.num_labels > 0) return "is a " + model_class_name(dc) + " (label logits, no lm_head) and cannot guess tokens";
  if (dc.vocab_size != mc.vocab_size)
    return "its vocabulary has " + std::to_string(dc.vocab_size) + " ids, the model's " + std::to_string(mc.vocab_size) +
           ": a draft model must share the model's tokenizer";
  return {};
}

double draft_guess_cost(const checkpoint& draft, const checkpoint& model) {
  return static_cast<double>(draft.weights.active_bytes) / static_cast<double>(std::max<size_t>(1, model.weights.active_bytes));
}

draft_sequence::draft_sequence(const checkpoint& draft, int64_t max_len, int64_t target_vocab_size, int32_t num_tokens)
    : pool_(draft, max_len), target_vocab_(target_vocab_size), num_tokens_(num_tokens) {}

std::vector<int32_t> draft_sequence::propose(std::span<const int32_t> context, int32_t max_drafts) {
  const int64_t room = pool_.capacity();
  const int32_t k = std::min(num_tokens_, max_drafts);
  std::vector<int32_t> out;
  if (k <= 0 || context.empty() || static_cast<int64_t>(context.size()) + k - 1 > room) return out;
  // Keep the longest prefix held; the last context token is fed again at least, for its logits.
  size_t common = 0;
  while (common < held_.size() && common + 1 < context.size() && held_[common] == context[common]) ++common;
  held_.assign(context.begin(), context.end());
  step_sequence sq{0, context.subspan(common), static_cast<int32_t>(common), pool_.table, logits_mode::last, -1};
  pool_.step(std::span<const step_sequence>(&sq, 1), res_);
  out.reserve(static_cast<size_t>(k));
  out.push_back(draft_guess(res_.row(0), target_vocab_));
  while (static_cast<int32_t>(out.size()) < k) {
    held_.push_back(out.back());
    sq = step_sequence{0, std::span<const int32_t>(&held_.back(), 1), static_cast<int32_t>(held_.size() - 1), pool_.table,
                       logits_mode::last, -1};
    pool_.step(std::span<const step_sequence>(&sq, 1), res_);
    out.push_back(draft_guess(res_.row(0), target_vocab_));
  }
  return out;
}

}  // namespace troupe
