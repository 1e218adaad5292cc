// Penalties over a per-thread count table, so a sampler per sequence costs no vocab-sized memory.
#include "runtime/sampling/penalties.hpp"

#include <string>
#include <vector>

#include "runtime/core/error.hpp"

namespace troupe::sampling_detail {

namespace {

void check_ids(std::span<const int32_t> ids, size_t vocab, const char* what) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || static_cast<size_t>(ids[i]) >= vocab)
      throw_error(errc::out_of_range, std::string(what) + "[" + std::to_string(i) + "] = " +
                                          std::to_string(ids[i]) +
                                          " is not a token id of this row (vocab " +
                                          std::to_string(vocab) + ")");
  }
}

constexpr uint32_t kInPrompt = 1u << 31;  // low bits: count in output

}  // namespace

void apply_penalties(std::span<float> logits, std::span<const int32_t> prompt,
                     std::span<const int32_t> output, float repetition, float presence,
                     float frequency) {
  const bool use_repetition = repetition != 1.0f;
  const bool use_output = presence != 0.0f || frequency != 0.0f;
  if (!use_repetition && !use_output) return;
  const size_t vocab = logits.size();
  // Check everything before touching the table, so a throw leaves it all-zero.
  if (use_repetition) check_ids(prompt, vocab, "prompt");
  check_ids(output, vocab, "output");
  TROUPE_ASSERT(output.size() < kInPrompt);

  thread_local std::vector<uint32_t> table;
  if (table.size() < vocab) table.resize(vocab, 0);
  for (const int32_t t : output) ++table[t];
  if (use_repetition)
    for (const int32_t t : prompt) table[t] |= kInPrompt;

  // The first visit of a token applies every penalty and clears its entry; later visits of the
  // same id then find 0 and skip, and the table is all-zero again at the end.
  auto visit = [&](int32_t t) {
    const uint32_t entry = table[t];
    if (entry == 0) return;
    table[t] = 0;
    float l = logits[t];
    if (use_repetition) l = l > 0.0f ? l / repetition : l * repetition;
    const uint32_t count = entry & ~kInPrompt;
    if (use_output && count > 0) {
      // Two separate subtractions in this order, as vLLM does them on its tensors.
      l -= frequency * static_cast<float>(count);
      l -= presence;
    }
    logits[t] = l;
  };
  if (use_repetition)
    for (const int32_t t : prompt) visit(t);
  for (const int32_t t : output) visit(t);
}

}  // namespace troupe::sampling_detail
