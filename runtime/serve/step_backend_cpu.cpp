// The CPU step backend: parallel_runner and its pools, blocks copied by kv_block_io.
#include <string>
#include <utility>

#include "runtime/engine/parallel_runner.hpp"
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
  // A block's payload is per layer (kv_block_io.hpp), and pipeline stages hold consecutive layers:
  // the whole payload is the stages' payloads one after another.
  void save_block(block_id b, std::string& out) const override {
    for (int32_t s = 0; s < engine_.pipeline_size(); ++s) {
      const auto& st = engine_.stage(s);
      prefix::gather_block(st.pools(), b, out, st.kv_replicas());
    }
  }
  void load_block(block_id b, std::string_view payload) override {
    const prefix::kv_layout whole = kv_layout();
    if (payload.size() != whole.payload_bytes())  // before any stage is written
      throw_error(errc::invalid_argument, "load_block: payload has " + std::to_string(payload.size()) +
                                              " bytes; a block of this pool has " + std::to_string(whole.payload_bytes()));
    size_t at = 0;
    for (int32_t s = 0; s < engine_.pipeline_size(); ++s) {
      auto& st = engine_.stage(s);
      const size_t n = prefix::layout_of(std::as_const(st).pools(), st.kv_replicas()).payload_bytes();
      prefix::scatter_block(st.pools(), b, payload.substr(at, n), st.kv_replicas());
      at += n;
    }
  }
  prefix::kv_layout kv_layout() const override {
    prefix::kv_layout l = prefix::layout_of(engine_.stage(0).pools(), engine_.stage(0).kv_replicas());
    l.num_layers = static_cast<int32_t>(engine_.config().num_hidden_layers);
    return l;
  }
  int32_t num_blocks() const noexcept override { return engine_.num_blocks(); }

 private:
  std::shared_ptr<const checkpoint> ckpt_;  // the engine reads it in place
  parallel_runner engine_;
};

}  // namespace

std::unique_ptr<step_backend> make_cpu_backend(std::shared_ptr<const checkpoint> ckpt, int32_t num_blocks,
                                               int32_t block_size, dtype kv_type, model_runner_options runner_options,
                                               const std::vector<std::shared_ptr<const lora_adapter>>& adapters,
                                               parallel_config parallel) {
  return std::make_unique<cpu_backend>(std::move(ckpt), num_blocks, block_size, kv_type, runner_options, adapters, parallel);
}

}  // namespace troupe::serve
