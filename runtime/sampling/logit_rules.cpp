#include "runtime/sampling/logit_rules.hpp"

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "runtime/core/error.hpp"

namespace troupe::sampling_detail {

namespace {

void check_id(int32_t id, size_t vocab, const char* field) {
  if (id < 0 || static_cast<size_t>(id) >= vocab)
    throw_error(errc::out_of_range, std::string(field) + " holds token id " + std::to_string(id) +
                                        ", outside the logits row of " + std::to_string(vocab));
}

}  // namespace

void apply_logit_rules(std::span<float> logits, const sampling_params& p, std::span<const int32_t> output) {
  const size_t output_len = output.size();
  constexpr float neg_inf = -std::numeric_limits<float>::infinity();
  const size_t vocab = logits.size();
  if (!p.allowed_token_ids.empty()) {
    // Keep the allowed values, mask the whole row, put them back: one pass over the row, and
    // repeated ids are harmless.
    thread_local std::vector<float> kept;
    kept.clear();
    for (int32_t id : p.allowed_token_ids) {
      check_id(id, vocab, "allowed_token_ids");
      kept.push_back(logits[static_cast<size_t>(id)]);
    }
    std::fill(logits.begin(), logits.end(), neg_inf);
    for (size_t i = 0; i < kept.size(); ++i) logits[static_cast<size_t>(p.allowed_token_ids[i])] = kept[i];
  }
  // A bad word's last token is banned where the output ends with the rest of it (a one-token
  // word: always). Only the output counts, as in vLLM: a prompt ending in "Hello" does not ban
  // "world" from starting the output.
  for (const auto& w : p.bad_words_ids) {
    const size_t prefix = w.size() - 1;
    if (prefix > output_len) continue;
    if (std::equal(w.begin(), w.end() - 1, output.end() - static_cast<ptrdiff_t>(prefix))) {
      check_id(w.back(), vocab, "bad_words_ids");
      logits[static_cast<size_t>(w.back())] = neg_inf;
    }
  }
  if (output_len < static_cast<size_t>(p.min_tokens))
    for (int32_t id : p.min_tokens_stop_ids) {
      check_id(id, vocab, "min_tokens_stop_ids");
      logits[static_cast<size_t>(id)] = neg_inf;
    }
  for (const auto& [id, bias] : p.logit_bias) {
    check_id(id, vocab, "logit_bias");
    logits[static_cast<size_t>(id)] += bias;
  }
}

}  // namespace troupe::sampling_detail
