// The CPU step backend: tensor_parallel_runner and its pools, blocks copied by kv_block_io.
#include <utility>

#include "runtime/engine/tensor_parallel_runner.hpp"
#include "runtime/prefix/kv_block_io.hpp"
#include "runtime/serve/step_backend.hpp"

namespace troupe::serve {

namespace {

class cpu_backend final : public step_backend {
 public:
  cpu_backend(std::shared_ptr<const checkpoint> ckpt, int32_t num_blocks, int32_t block_size, dtype kv_type,
              model_runner_options ro, const std::vector<std::shared_ptr<const lora_adapter>>& adapters,
              parallel_config parallel)
      : ckpt_(std::move(ckpt)), engine_(*ckpt_, num_blocks, block_size, kv_type, ro, parallel) {
    for (size_t i = 0; i < adapters.size(); ++i) engine_.set_adapter(static_cast<int32_t>(i), adapters[i]);
  }

  void set_adapter(int32_t slot, std::shared_ptr<const lora_adapter> adapter) override {
    engine_.set_adapter(slot, std::move(adapter));
  }

  void step(std::span<const step_sequence> batch, step_result& out) override { engine_.step(batch, out); }
  void save_block(block_id b, std::string& out) const override {
    prefix::gather_block(engine_.pools(), b, out, engine_.kv_replicas());
  }
  void load_block(block_id b, std::string_view payload) override {
    prefix::scatter_block(engine_.pools(), b, payload, engine_.kv_replicas());
  }
  prefix::kv_layout kv_layout() const override { return prefix::layout_of(engine_.pools(), engine_.kv_replicas()); }
  int32_t num_blocks() const noexcept override { return engine_.num_blocks(); }

 private:
  std::shared_ptr<const checkpoint> ckpt_;  // the engine reads it in place
  tensor_parallel_runner engine_;
};

}  // namespace

std::unique_ptr<step_backend> make_cpu_backend(std::shared_ptr<const checkpoint> ckpt, int32_t num_blocks,
                                               int32_t block_size, dtype kv_type, model_runner_options runner_options,
                                               const std::vector<std::shared_ptr<const lora_adapter>>& adapters,
                                               parallel_config parallel) {
  return std::make_unique<cpu_backend>(std::move(ckpt), num_blocks, block_size, kv_type, runner_options, adapters, parallel);
}

}  // namespace troupe::serve
