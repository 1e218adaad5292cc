#include "runtime/engine/tensor_parallel_runner.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "runtime/core/error.hpp"
#include "runtime/engine/omp_threads.hpp"
#include "runtime/lora/lora_shard.hpp"
#include "runtime/model/shard.hpp"

namespace troupe {

tensor_parallel_runner::tensor_parallel_runner(const checkpoint& ckpt, int32_t num_blocks, int32_t block_size,
                                               dtype kv_type, model_runner_options opts, parallel_config parallel,
                                               const std::vector<std::shared_ptr<model_runner_scratch>>& rank_scratch)
    : ckpt_(ckpt), expert_parallel_(parallel.expert_parallel), threads_(parallel.threads) {
  check_shardable(ckpt, parallel);  // before any thread or pool exists
  const int32_t tp_size = parallel.size;
  TROUPE_ASSERT(rank_scratch.empty() || static_cast<int32_t>(rank_scratch.size()) == tp_size);
  auto scratch_of = [&](int32_t r) { return rank_scratch.empty() ? nullptr : rank_scratch[static_cast<size_t>(r)]; };
  // A pipeline stage's pools hold its layers only.
  const int64_t end_layer = opts.end_layer < 0 ? ckpt.config.num_hidden_layers : opts.end_layer;
  auto stage_config = [&](model_config c) {
    c.num_hidden_layers = std::max<int64_t>(end_layer - opts.first_layer, 1);  // model_runner refuses an empty range
    return c;
  };
  if (tp_size == 1) {
    pools_.push_back(std::make_unique<kv_cache>(stage_config(ckpt.config), num_blocks, block_size, kv_type));
    opts.scratch = scratch_of(0);
    runners_.push_back(std::make_unique<model_runner>(ckpt, *pools_[0], opts));
    return;
  }
  group_ = std::make_unique<tp_group>(tp_size, parallel.threads / tp_size);  // 0: tp_group's default
  for (int32_t r = 0; r < tp_size; ++r) {
    shards_.push_back(shard_checkpoint(ckpt, r, parallel, opts.first_layer, end_layer));
    pools_.push_back(std::make_unique<kv_cache>(stage_config(shards_.back()->config), num_blocks, block_size, kv_type));
    model_runner_options o = opts;
    o.tp = group_.get();
    o.tp_rank = r;
    o.scratch = scratch_of(r);
    runners_.push_back(std::make_unique<model_runner>(*shards_.back(), *pools_.back(), o));
    vocab_begin_.push_back(vocab_range_begin(ckpt, r, tp_size));
  }
  vocab_begin_.push_back(ckpt.weights.lm_head.rows);
  partial_.resize(static_cast<size_t>(tp_size));
  residual_.resize(static_cast<size_t>(tp_size));
}

tensor_parallel_runner::~tensor_parallel_runner() = default;

int32_t tensor_parallel_runner::add_adapter(std::shared_ptr<const lora_adapter> adapter) {
  if (tp_size() == 1) return runners_[0]->add_adapter(std::move(adapter));
  if (!adapter) return runners_[0]->add_adapter(nullptr);  // its error
  // Every rank its share (lora_shard.hpp), all made before any rank takes one, so that a failure
  // leaves the ranks' slots in step.
  std::vector<std::shared_ptr<const lora_adapter>> shares;
  for (int32_t r = 0; r < tp_size(); ++r)
    shares.push_back(std::make_shared<const lora_adapter>(shard_lora_adapter(*adapter, ckpt_.config, r, tp_size())));
  int32_t slot = -1;
  for (int32_t r = 0; r < tp_size(); ++r) slot = runners_[static_cast<size_t>(r)]->add_adapter(std::move(shares[static_cast<size_t>(r)]));
  return slot;
}

void tensor_parallel_runner::set_adapter(int32_t slot, std::shared_ptr<const lora_adapter> adapter) {
  if (tp_size() == 1 || !adapter) {
    for (auto& r : runners_) r->set_adapter(slot, adapter);
    return;
  }
  std::vector<std::shared_ptr<const lora_adapter>> shares;  // all made before any rank takes one
  for (int32_t r = 0; r < tp_size(); ++r)
    shares.push_back(std::make_shared<const lora_adapter>(shard_lora_adapter(*adapter, ckpt_.config, r, tp_size())));
  for (int32_t r = 0; r < tp_size(); ++r)
    runners_[static_cast<size_t>(r)]->set_adapter(slot, std::move(shares[static_cast<size_t>(r)]));
}

int64_t tensor_parallel_runner::num_adapters() const noexcept { return runners_[0]->num_adapters(); }

std::vector<std::shared_ptr<model_runner_scratch>> tensor_parallel_runner::scratch() const {
  std::vector<std::shared_ptr<model_runner_scratch>> v;
  for (const auto& r : runners_) v.push_back(r->scratch());
  return v;
}

int32_t tensor_parallel_runner::threads_per_rank() const noexcept {
  if (group_) return group_->threads_per_rank();
  return threads_ > 0 ? threads_ : omp_threads_now();
}

int32_t tensor_parallel_runner::kv_replicas() const noexcept {
  return kv_head_replicas(ckpt_.config.num_key_value_heads, tp_size());
}

std::vector<const kv_cache*> tensor_parallel_runner::pools() const {
  std::vector<const kv_cache*> v;
  for (const auto& p : pools_) v.push_back(p.get());
  return v;
}

std::vector<kv_cache*> tensor_parallel_runner::pools() {
  std::vector<kv_cache*> v;
  for (auto& p : pools_) v.push_back(p.get());
  return v;
}

size_t tensor_parallel_runner::kv_bytes() const noexcept {
  size_t b = 0;
  for (const auto& p : pools_) b += p->bytes();
  return b;
}

void tensor_parallel_runner::step(std::span<const step_sequence> batch, step_result& out) { step(batch, out, nullptr, nullptr); }

void tensor_parallel_runner::step(std::span<const step_sequence> batch, step_result& out, const float* residual_in,
                                  aligned_vector<float>* residual_out) {
  if (tp_size() == 1) {
    omp_threads_scope threads(threads_);
    runners_[0]->step(batch, out, residual_in, residual_out);
    return;
  }
  // The batch's errors from the caller's thread, before any rank starts (the ranks would find the
  // same ones, but each rank's pool only knows its own heads).
  validate(batch);
  if (residual_out) {  // a stage before the last: no logits
    group_->run([&](int32_t r) {
      runners_[static_cast<size_t>(r)]->step(batch, partial_[static_cast<size_t>(r)], residual_in,
                                             r == 0 ? residual_out : &residual_[static_cast<size_t>(r)]);
    });
    return;
  }
  const int64_t vocab = ckpt_.weights.lm_head.rows;
  out.vocab_size = vocab;
  out.first_row.assign(batch.size(), 0);
  out.num_rows.assign(batch.size(), 0);
  int64_t rows = 0;
  for (size_t s = 0; s < batch.size(); ++s) {
    out.first_row[s] = rows;
    out.num_rows[s] = batch[s].logits == logits_mode::all    ? static_cast<int64_t>(batch[s].tokens.size())
                      : batch[s].logits == logits_mode::last ? 1
                                                              : 0;
    rows += out.num_rows[s];
  }
  out.logits.resize(static_cast<size_t>(rows * vocab));
  group_->run([&](int32_t r) {
    auto& part = partial_[static_cast<size_t>(r)];
    runners_[static_cast<size_t>(r)]->step(batch, part, residual_in, nullptr);
    // Each rank writes its vocabulary columns of every row.
    const int64_t v0 = vocab_begin_[static_cast<size_t>(r)], width = part.vocab_size;
    TROUPE_ASSERT(width == vocab_begin_[static_cast<size_t>(r) + 1] - v0);
    TROUPE_ASSERT(static_cast<int64_t>(part.logits.size()) == rows * width);
    for (int64_t i = 0; i < rows; ++i)
      std::memcpy(out.logits.data() + i * vocab + v0, part.logits.data() + i * width, static_cast<size_t>(width) * sizeof(float));
  });
  // Hidden states: after each layer's all-reduce every rank holds the whole residual stream, and
  // the final norm's weights are whole, so rank 0's rows are the model's.
  const auto& first = partial_.front();
  out.hidden_size = first.hidden_size;
  out.hidden = first.hidden;
  out.hidden_row = first.hidden_row;
}

}  // namespace troupe
