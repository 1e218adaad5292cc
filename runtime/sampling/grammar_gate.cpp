#include "runtime/sampling/grammar_gate.hpp"

#include <string>

namespace troupe::sampling_detail {

grammar_gate::grammar_gate(const sampling_params& p)
    : matcher_(p.grammar, p.grammar_end_ids),
      think_start_(p.grammar_think_start),
      think_end_(p.grammar_think_end),
      phase_(p.grammar_think_end < 0 ? phase::active
             : p.grammar_in_thinking ? phase::thinking
                                     : phase::waiting) {}

void grammar_gate::mask(std::span<float> logits) {
  if (phase_ == phase::thinking) return;
  const bool may_think = phase_ == phase::waiting && think_start_ >= 0 && static_cast<size_t>(think_start_) < logits.size();
  const float think = may_think ? logits[static_cast<size_t>(think_start_)] : 0.0f;
  matcher_.mask_logits(logits);
  if (may_think) logits[static_cast<size_t>(think_start_)] = think;
}

void grammar_gate::advance(int32_t id, errc code) {
  switch (phase_) {
    case phase::thinking:
      if (id == think_end_) phase_ = phase::active;
      return;
    case phase::waiting:
      if (id == think_start_) {
        phase_ = phase::thinking;
        return;
      }
      phase_ = phase::active;
      break;
    case phase::active: break;
  }
  if (!matcher_.accept_token(id))
    throw_error(code, "structured output: token " + std::to_string(id) + " does not fit the grammar here");
}

bool grammar_gate::complete() const { return phase_ == phase::active && matcher_.is_complete(); }

}  // namespace troupe::sampling_detail
