#include "runtime/serve/draft_proposer.hpp"

#include <algorithm>

#include "runtime/core/error.hpp"
#include "runtime/engine/draft_sequence.hpp"

namespace troupe::serve {

draft_proposer::draft_proposer(std::unique_ptr<step_engine> draft, int64_t target_vocab_size)
    : draft_(std::move(draft)), target_vocab_(target_vocab_size) {
  TROUPE_ASSERT(draft_ != nullptr && target_vocab_ > 0);
}

std::vector<std::pair<int64_t, std::vector<int32_t>>> draft_proposer::propose(const sched::step_plan& plan,
                                                                              const std::vector<int32_t>& sampled,
                                                                              const std::vector<int32_t>& counts) {
  // 1. What each entry made valid: its chunk up to the last accepted draft, and for an entry that
  //    guesses, the token sampled last (its K/V is the draft's; the target computes it next step).
  std::vector<int32_t> tokens;
  std::vector<size_t> first, length;
  std::vector<size_t> guessing;  // plan indices of the entries that guess
  size_t k = 0, next = 0;
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    const auto& e = plan.seqs[i];
    std::span<const int32_t> out;
    if (e.sample) {
      const auto c = static_cast<size_t>(counts.empty() ? 1 : counts[k]);
      ++k;
      TROUPE_ASSERT(next + c <= sampled.size());
      out = std::span<const int32_t>(sampled).subspan(next, c);
      next += c;
    }
    const bool failed = !out.empty() && out.front() < 0;
    size_t valid = static_cast<size_t>(e.num_tokens - e.num_draft);
    if (e.num_draft > 0 && !failed) valid += out.size() - 1;  // the drafts the target confirmed
    first.push_back(tokens.size());
    const auto chunk = plan.batch[i].tokens;
    tokens.insert(tokens.end(), chunk.begin(), chunk.begin() + static_cast<ptrdiff_t>(valid));
    if (e.num_lookahead > 0 && !out.empty() && !failed) {
      tokens.push_back(out.back());
      guessing.push_back(i);
    }
    length.push_back(tokens.size() - first.back());
  }
  std::vector<step_sequence> batch;
  std::vector<size_t> row_of(plan.seqs.size(), 0);  // the entry's index in `batch`
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    if (length[i] == 0) continue;
    step_sequence sq;
    sq.seq_id = plan.seqs[i].seq_id;
    sq.tokens = std::span<const int32_t>(tokens).subspan(first[i], length[i]);
    sq.start_pos = plan.batch[i].start_pos;
    sq.block_table = plan.batch[i].block_table;
    sq.logits = std::binary_search(guessing.begin(), guessing.end(), i) ? logits_mode::last : logits_mode::none;
    row_of[i] = batch.size();
    batch.push_back(sq);
  }
  std::vector<std::pair<int64_t, std::vector<int32_t>>> out;
  if (batch.empty()) return out;
  draft_->step(batch, result_);

  // 2. The first guess from that step's last rows, then one token at a time: each guess is fed
  //    back at the next position (inside the lookahead the scheduler reserved) for the one after.
  out.reserve(guessing.size());
  std::vector<int32_t> pos;  // where each guesser's next fed token goes
  for (size_t i : guessing) {
    std::vector<int32_t> g;
    g.reserve(static_cast<size_t>(plan.seqs[i].num_lookahead));
    g.push_back(draft_guess(result_.row(row_of[i]), target_vocab_));
    out.emplace_back(plan.seqs[i].seq_id, std::move(g));
    pos.push_back(plan.batch[i].start_pos + static_cast<int32_t>(length[i]));
  }
  std::vector<size_t> live;  // indices into `guessing` still short of their lookahead
  for (int32_t r = 1;; ++r) {
    batch.clear();
    live.clear();
    for (size_t g = 0; g < guessing.size(); ++g) {
      const size_t i = guessing[g];
      if (r >= plan.seqs[i].num_lookahead) continue;
      step_sequence sq;
      sq.seq_id = plan.seqs[i].seq_id;
      sq.tokens = std::span<const int32_t>(out[g].second).subspan(static_cast<size_t>(r - 1), 1);
      sq.start_pos = pos[g] + r - 1;
      sq.block_table = plan.batch[i].block_table;
      sq.logits = logits_mode::last;
      batch.push_back(sq);
      live.push_back(g);
    }
    if (batch.empty()) break;
    draft_->step(batch, result_);
    // The spans above point into out[g].second, which reserved its whole lookahead: no reallocation.
    for (size_t b = 0; b < live.size(); ++b) out[live[b]].second.push_back(draft_guess(result_.row(b), target_vocab_));
  }
  return out;
}

}  // namespace troupe::serve
