// Greedy decoding through the KV cache against a golden case, as the engine tests check it: the
// prompt in one step, then one token a step; each step's logits within `tolerance` of the
// reference where it stored them. Returns the ids decoded (the caller compares them).
#pragma once

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <memory>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "runtime/engine/model_runner.hpp"
#include "tests/runtime/engine/golden.hpp"

namespace troupe::testing {

// Any runner with step(batch, result) (model_runner, cuda_model_runner) over a pool that `table`
// covers; slot: the sequence's LoRA adapter slot. worst (optional) gets the largest error seen.
template <class Runner>
std::vector<int32_t> decode_and_check(Runner& runner, std::span<const int32_t> table, const golden_case& c,
                                      int64_t vocab, const std::string& what, double tolerance, int32_t slot = -1,
                                      double* worst = nullptr) {
  step_result res;
  step_sequence sq{0, c.prompt, 0, table, logits_mode::last, slot};
  runner.step(std::span<const step_sequence>(&sq, 1), res);
  std::vector<int32_t> got;
  for (size_t i = 0; i < c.greedy.size(); ++i) {
    auto row = res.row(0);
    auto it = std::find(c.decode_logits.index.begin(), c.decode_logits.index.end(), static_cast<int64_t>(i));
    if (it != c.decode_logits.index.end()) {
      const size_t r = static_cast<size_t>(it - c.decode_logits.index.begin());
      const double err = row_error(row.data(), c.decode_logits.data.data() + r * vocab, vocab);
      if (worst) *worst = std::max(*worst, err);
      BOOST_TEST(err <= tolerance, what << " " << c.id << " decode step " << i << ": relative error " << err);
    }
    got.push_back(static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin()));
    if (i + 1 == c.greedy.size()) break;
    step_sequence d{0, std::span<const int32_t>(&got.back(), 1), static_cast<int32_t>(c.prompt.size() + i), table,
                    logits_mode::last, slot};
    runner.step(std::span<const step_sequence>(&d, 1), res);
  }
  return got;
}

// The CPU runner on a pool just large enough, with `adapter` (if any) for the sequence.
inline std::vector<int32_t> check_cached_decode(const checkpoint& ck, const golden_case& c, const std::string& what,
                                                double tolerance, std::shared_ptr<const lora_adapter> adapter = nullptr) {
  const int64_t max_len = static_cast<int64_t>(c.prompt.size() + c.greedy.size());
  kv_cache kv(ck.config, static_cast<int32_t>((max_len + 15) / 16));
  model_runner runner(ck, kv);
  const int32_t slot = adapter ? runner.add_adapter(std::move(adapter)) : -1;
  std::vector<int32_t> table(static_cast<size_t>(kv.num_blocks()));
  std::iota(table.begin(), table.end(), 0);
  return decode_and_check(runner, table, c, ck.config.vocab_size, what, tolerance, slot);
}

}  // namespace troupe::testing
