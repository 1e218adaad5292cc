// The batch-invariance check the engine tests run for each compute mode: every golden prompt of a
// set in one step, blocks scattered through the pool in reversed, interleaved order, must give
// logits bit-identical to the prompt run alone.
#pragma once

#include <boost/test/unit_test.hpp>

#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "runtime/engine/model_runner.hpp"
#include "tests/runtime/engine/golden.hpp"

namespace troupe::testing {

// Any runner with step(batch, result) over a pool of num_blocks blocks (model_runner,
// tensor_parallel_runner); `what` names the set and the mode in failures.
template <class Runner>
void check_batch_invariance_on(Runner& runner, int32_t num_blocks, const std::vector<golden_case>& cases,
                               const std::string& what) {
  std::vector<std::vector<float>> alone;
  for (const auto& c : cases) {
    std::vector<int32_t> t((c.prompt.size() + 15) / 16);
    std::iota(t.begin(), t.end(), 0);
    step_sequence sq{0, c.prompt, 0, t, logits_mode::all};
    step_result r;
    runner.step(std::span<const step_sequence>(&sq, 1), r);
    alone.push_back(r.logits);
  }
  // Interleaved, reversed block ids so the batch shares nothing with the solo layout.
  std::vector<std::vector<int32_t>> tables(cases.size());
  int32_t next = num_blocks - 1;
  for (size_t i = 0; i < cases.size(); ++i)
    for (size_t b = 0; b < (cases[i].prompt.size() + 15) / 16; ++b) tables[i].push_back(next--);
  std::vector<step_sequence> batch;
  for (size_t i = 0; i < cases.size(); ++i)
    batch.push_back({static_cast<int64_t>(i), cases[i].prompt, 0, tables[i], logits_mode::all});
  step_result r;
  runner.step(batch, r);
  for (size_t i = 0; i < cases.size(); ++i) {
    BOOST_REQUIRE_EQUAL(r.num_rows[i], static_cast<int64_t>(cases[i].prompt.size()));
    BOOST_TEST(std::memcmp(r.row(i).data(), alone[i].data(), alone[i].size() * sizeof(float)) == 0,
               what << " " << cases[i].id << ": batched logits differ from solo logits");
  }
}

// Blocks for every case laid out twice (alone from block 0, then all at once from the top).
inline int32_t batch_invariance_blocks(const std::vector<golden_case>& cases) {
  int32_t blocks = 0;
  for (const auto& c : cases) blocks += static_cast<int32_t>((c.prompt.size() + 1 + 15) / 16);
  return blocks * 2;
}

inline void check_batch_invariance(const checkpoint& ck, const std::vector<golden_case>& cases, const std::string& set,
                                   model_runner_options options = {}) {
  kv_cache kv(ck.config, batch_invariance_blocks(cases));
  model_runner runner(ck, kv, options);
  check_batch_invariance_on(runner, kv.num_blocks(), cases, set + " (" + to_string(options.compute) + ")");
}

}  // namespace troupe::testing
