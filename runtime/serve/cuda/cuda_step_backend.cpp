#include "runtime/serve/cuda/cuda_step_backend.hpp"

#include <cstring>
#include <string>
#include <vector>

#include "runtime/core/error.hpp"
#include "runtime/prefix/kv_block_io.hpp"

namespace troupe::serve {

namespace {

class cuda_backend final : public step_backend {
 public:
  // The weights are uploaded: the checkpoint is not read after the constructor.
  cuda_backend(const checkpoint& ckpt, int32_t num_blocks, int32_t block_size, cuda_runner_options opts)
      : runner_(ckpt, num_blocks, block_size, opts),
        layout_(prefix::layout_for(ckpt.config, block_size, dtype::f32)),
        scratch_(runner_.kv().block_floats()) {
    TROUPE_ASSERT(layout_.payload_bytes() == scratch_.size() * sizeof(float));
  }

  void step(std::span<const step_sequence> batch, step_result& out) override { runner_.step(batch, out); }

  void save_block(block_id b, std::string& out) const override {
    runner_.kv().read_block(b, scratch_);
    const size_t at = out.size();
    out.resize(at + scratch_.size() * sizeof(float));
    std::memcpy(out.data() + at, scratch_.data(), scratch_.size() * sizeof(float));
  }

  void load_block(block_id b, std::string_view payload) override {
    if (payload.size() != layout_.payload_bytes())
      throw_error(errc::invalid_argument, "load_block: payload has " + std::to_string(payload.size()) +
                                              " bytes; a block of this pool has " + std::to_string(layout_.payload_bytes()));
    std::memcpy(scratch_.data(), payload.data(), payload.size());  // aligned floats for the copy
    runner_.kv().write_block(b, scratch_);
  }

  prefix::kv_layout kv_layout() const override { return layout_; }
  int32_t num_blocks() const noexcept override { return runner_.kv().num_blocks(); }

 private:
  cuda_model_runner runner_;
  prefix::kv_layout layout_;
  mutable std::vector<float> scratch_;  // one block, on the executor's thread only
};

}  // namespace

std::unique_ptr<step_backend> make_cuda_backend(const checkpoint& ckpt, int32_t num_blocks, int32_t block_size,
                                                cuda_runner_options opts) {
  return std::make_unique<cuda_backend>(ckpt, num_blocks, block_size, opts);
}

}  // namespace troupe::serve
