// A sequence's structured-output constraint as the sampler applies it: the grammar matcher, and
// when the request separates Qwen3's reasoning, the phase that keeps the grammar out of the
// thinking (vLLM applies the grammar only once the reasoning parser saw the reasoning end).
//   waiting:  the first token may open a think block (<think>) or start the grammar's text;
//   thinking: inside the block nothing is masked, until </think>;
//   active:   every token is masked and fed to the grammar.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "runtime/core/error.hpp"
#include "runtime/grammar/matcher.hpp"
#include "runtime/sampling/sampler.hpp"

namespace troupe::sampling_detail {

class grammar_gate {
 public:
  explicit grammar_gate(const sampling_params& p);
  // Sets the logits of tokens that may not come to -inf.
  void mask(std::span<float> logits);
  // The token that came. Throws troupe::error(code) when the grammar refuses it (a bug in the
  // sampler for a sampled token, bad input for a replayed one).
  void advance(int32_t id, errc code);
  bool complete() const;

 private:
  enum class phase { waiting, thinking, active };
  grammar::matcher matcher_;
  int32_t think_start_, think_end_;
  phase phase_;
};

}  // namespace troupe::sampling_detail
