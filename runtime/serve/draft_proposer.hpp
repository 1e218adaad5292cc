// Speculative decoding with a draft model (vLLM's draft_model method; docs/speculative.md): a
// smaller model of the same vocabulary guesses the next tokens greedily after each step, and the
// target checks the guesses in its next step beside the real token (scheduled_seq::num_draft), so
// the tokens out are exactly the target's whatever the draft says.
//
// The draft's KV pool has as many blocks, of the same size, as the target's and is read and
// written through the target's block tables: the scheduler allocates nothing for the draft except
// the lookahead positions its guesses occupy (scheduled_seq::num_lookahead). After every step the
// draft holds K/V for exactly the positions the target holds valid (the chunk less its rejected
// drafts), so preemption, chunked prefill and local prefix-cache hits need nothing more. Blocks
// fetched from the shared store (Redis) bring the target's K/V only: the draft reads whatever
// its pool held there, guesses worse for those sequences, and changes no token.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/engine/step_engine.hpp"
#include "runtime/sched/scheduler.hpp"

namespace troupe::serve {

class draft_proposer {
 public:
  // `draft` runs the draft model over a pool of the target's block count and size; guesses are
  // ids below target_vocab_size (the draft's vocabulary may be padded differently).
  draft_proposer(std::unique_ptr<step_engine> draft, int64_t target_vocab_size);

  // After the target ran `plan` and sampled: `sampled` / `counts` as step_outcome holds them (a
  // lone -1 for a sequence that failed). The draft computes every entry's valid tokens (its chunk
  // without rejected drafts, plus the ones sampled), then guesses num_lookahead tokens for each
  // entry that asked and sampled: (seq_id, guesses) in plan order. Throws what the draft's step
  // throws; the guesses are then lost and the target's tokens unaffected.
  std::vector<std::pair<int64_t, std::vector<int32_t>>> propose(const sched::step_plan& plan,
                                                                const std::vector<int32_t>& sampled,
                                                                const std::vector<int32_t>& counts);

 private:
  std::unique_ptr<step_engine> draft_;
  int64_t target_vocab_;
  step_result result_;
};

}  // namespace troupe::serve
