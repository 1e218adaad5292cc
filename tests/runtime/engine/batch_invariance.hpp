// The batch-invariance check the engine tests run for each compute mode: every golden prompt of a
// set in one step, blocks scattered through the pool in reversed, interleaved order, must give
// logits bit-identical to the prompt run alone.
#pragma once

#include <boost/test/unit_test.hpp>

#include <algorithm>
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

// Every case under each adapter slot (-1: the base model) in one step, blocks scattered and the
// order reversed, on any runner with step() over num_blocks blocks: each sequence's logits equal,
// bit for bit, its prompt run alone with its slot, all rows and last rows only; and a prompt
// prefilled in chunks of 5 ends on the same last row. The slots must change the logits.
template <class Runner>
void check_mixed_adapter_invariance_on(Runner& runner, int32_t num_blocks, int64_t vocab,
                                       const std::vector<golden_case>& cases, const std::vector<int32_t>& slots,
                                       const std::string& what) {
  struct item {
    const golden_case* c;
    int32_t slot;
  };
  std::vector<item> items;
  for (const auto& c : cases)
    for (int32_t s : slots) items.push_back({&c, s});
  auto identity_table = [](size_t tokens) {
    std::vector<int32_t> t((tokens + 15) / 16);
    std::iota(t.begin(), t.end(), 0);
    return t;
  };
  std::vector<std::vector<float>> alone;
  for (const item& it : items) {
    auto table = identity_table(it.c->prompt.size());
    step_sequence sq{0, it.c->prompt, 0, table, logits_mode::all, it.slot};
    step_result r;
    runner.step(std::span<const step_sequence>(&sq, 1), r);
    alone.push_back(r.logits);
  }
  for (size_t i = 1; i < slots.size(); ++i)
    BOOST_TEST(alone[i - 1] != alone[i], what << ": slots " << slots[i - 1] << " and " << slots[i] << " give the same logits");

  std::vector<std::vector<int32_t>> tables(items.size());
  int32_t next = num_blocks - 1;
  for (size_t i = 0; i < items.size(); ++i)
    for (size_t b = 0; b < (items[i].c->prompt.size() + 15) / 16; ++b) tables[i].push_back(next--);
  std::vector<step_sequence> batch;
  for (size_t i = items.size(); i-- > 0;)  // reversed: neighbours change
    batch.push_back({static_cast<int64_t>(i), items[i].c->prompt, 0, tables[i], logits_mode::all, items[i].slot});
  step_result r;
  runner.step(batch, r);
  for (size_t b = 0; b < batch.size(); ++b) {
    const size_t i = static_cast<size_t>(batch[b].seq_id);
    BOOST_TEST(std::memcmp(r.row(b).data(), alone[i].data(), alone[i].size() * sizeof(float)) == 0,
               what << " " << items[i].c->id << " adapter slot " << items[i].slot << ": batched logits differ from solo");
  }

  // Last rows only: the last layer runs on those rows alone, moved to the front, and each must keep
  // its own sequence's adapter.
  for (auto& sq : batch) sq.logits = logits_mode::last;
  runner.step(batch, r);
  for (size_t b = 0; b < batch.size(); ++b) {
    const size_t i = static_cast<size_t>(batch[b].seq_id);
    const float* last = alone[i].data() + (items[i].c->prompt.size() - 1) * vocab;
    BOOST_TEST(std::memcmp(r.row(b).data(), last, vocab * sizeof(float)) == 0,
               what << " " << items[i].c->id << " adapter slot " << items[i].slot << ": batched last row differs from solo");
  }

  // Chunked prefill (last rows only: the pruned path) ends on the same bits.
  for (size_t i = 0; i < items.size(); ++i) {
    const auto& prompt = items[i].c->prompt;
    auto table = identity_table(prompt.size());
    for (size_t start = 0; start < prompt.size(); start += 5) {
      const size_t n = std::min<size_t>(5, prompt.size() - start);
      step_sequence sq{0, std::span<const int32_t>(prompt.data() + start, n), static_cast<int32_t>(start), table,
                       start + n == prompt.size() ? logits_mode::last : logits_mode::none, items[i].slot};
      runner.step(std::span<const step_sequence>(&sq, 1), r);
    }
    BOOST_TEST(std::memcmp(r.row(0).data(), alone[i].data() + (prompt.size() - 1) * vocab, vocab * sizeof(float)) == 0,
               what << " " << items[i].c->id << " adapter slot " << items[i].slot << ": chunked prefill differs");
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
