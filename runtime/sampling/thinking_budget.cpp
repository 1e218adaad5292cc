#include "runtime/sampling/thinking_budget.hpp"

namespace troupe::sampling_detail {

thinking_budget::thinking_budget(const sampling_params& p)
    : budget_(p.thinking_token_budget),
      start_id_(p.think_start_id),
      end_id_(p.think_end_id),
      opened_in_prompt_(p.thinking_opened_in_prompt) {
  first_ = opened_in_prompt_ ? 0 : -1;
}

std::optional<int32_t> thinking_budget::forced(std::span<const int32_t> output) {
  if (output.size() < read_) {  // not the output read before: start over
    read_ = 0;
    first_ = opened_in_prompt_ ? 0 : -1;
    closed_ = false;
  }
  for (; read_ < output.size() && !closed_; ++read_) {
    const int32_t id = output[read_];
    if (first_ < 0) {
      if (id == start_id_) first_ = static_cast<int64_t>(read_) + 1;
    } else if (id == end_id_) {
      closed_ = true;
    }
  }
  read_ = output.size();
  if (closed_ || first_ < 0) return std::nullopt;
  if (static_cast<int64_t>(output.size()) - first_ < budget_) return std::nullopt;
  return end_id_;
}

}  // namespace troupe::sampling_detail
