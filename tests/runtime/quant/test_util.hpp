// Helpers of the quantization tests: the float32 model on a quantized model's dequantised weights
// (the reference the kernels must match), temporary directories, small random checkpoints.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "runtime/engine/generator.hpp"
#include "runtime/model/random_checkpoint.hpp"
#include "runtime/model/tensor_layout.hpp"
#include "runtime/quant/quantize.hpp"

namespace troupe::testing {

// A copy of `q` sharing its weights, except that each quantized weight becomes the float weight
// to_float(tensor, weight, owned) returns (owned: where its buffers are kept alive).
template <class F>
std::unique_ptr<checkpoint> with_float_weights(const checkpoint& q, F&& to_float) {
  auto out = std::make_unique<checkpoint>();
  out->dir = q.dir;
  out->config = q.config;
  out->generation = q.generation;
  out->weights = q.weights;
  for (const auto& t : expected_tensors(out->config)) {
    kernels::weight_ref* r = weight_slot(out->weights, t);
    if (r && r->scales) *r = to_float(t, *r, out->owned);
  }
  if (out->config.tie_word_embeddings) out->weights.lm_head = out->weights.embed_tokens;
  return out;
}

// A checkpoint whose quantized weights are replaced by float32 copies of code * scale. Shares the
// other weights with `q`, which must outlive it.
inline std::unique_ptr<checkpoint> dequantized_copy(const checkpoint& q) {
  return with_float_weights(q, [](const expected_tensor&, const kernels::weight_ref& r, auto& owned) {
    auto buf = std::make_shared<std::vector<float>>(static_cast<size_t>(r.rows * r.cols));
    for (int64_t i = 0; i < r.rows; ++i)
      for (int64_t j = 0; j < r.cols; ++j) (*buf)[static_cast<size_t>(i * r.cols + j)] = kernels::dequantized_at(r, i, j);
    owned.push_back(buf);
    return kernels::weight_ref{buf->data(), dtype::f32, r.rows, r.cols};
  });
}

// A directory under the temp dir, removed with this object.
struct temp_dir {
  std::filesystem::path path;
  explicit temp_dir(const std::string& tag)
      : path(std::filesystem::temp_directory_path() / ("troupe_quant_" + tag + "_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string str(const std::string& sub = "") const { return sub.empty() ? path.string() : (path / sub).string(); }
};

// A small dense Qwen3 of random BF16 weights (normal(0, 0.02), as make-checkpoint writes them):
// large enough that quantization error behaves as in real shapes, small enough for CI.
inline model_config small_random_config() {
  model_config c = preset_config("tiny");
  c.vocab_size = 4096;
  c.hidden_size = 256;
  c.intermediate_size = 768;
  c.num_hidden_layers = 4;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 64;
  c.bos_token_id = 4094;
  c.eos_token_ids = {4095};
  c.tie_word_embeddings = true;
  return c;
}

// The accuracy tests' model: small_random_config() with seed 11, written to `dir` + "/model".
inline std::string write_accuracy_model(const temp_dir& dir) {
  random_checkpoint_options opts;
  opts.seed = 11;
  write_random_checkpoint(dir.str("model"), small_random_config(), qwen3_generation_defaults(), opts);
  return dir.str("model");
}

inline std::vector<int32_t> random_ids(int64_t n, int64_t vocab, uint64_t seed) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    ids[static_cast<size_t>(i)] = static_cast<int32_t>(detail::mix64(seed * 1000003 + static_cast<uint64_t>(i)) % static_cast<uint64_t>(vocab - 2));
  return ids;
}

}  // namespace troupe::testing
