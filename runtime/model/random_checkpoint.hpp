// Random-weight checkpoints in the Hugging Face layout, of the real Qwen3 shapes: no weights can
// be downloaded here, so tests, benchmarks and the demo make their models with this.
// Weights are a pure function of (seed, tensor name, element index): same seed, same bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/core/dtype.hpp"
#include "runtime/model/config.hpp"

namespace troupe {

// "tiny", "qwen3-0.6b", "qwen3-moe-tiny".
std::vector<std::string> random_checkpoint_presets();
// Throws troupe::error(invalid_argument) listing the presets for an unknown name.
model_config preset_config(std::string_view preset);
// Qwen3's published generation_config.json: sampling, temperature 0.6, top_p 0.95, top_k 20,
// eos [151645, 151643].
generation_defaults qwen3_generation_defaults();

struct random_checkpoint_options {
  uint64_t seed = 0;
  dtype weight_type = dtype::bf16;  // f32, f16 or bf16, for every tensor
  std::string tokenizer_dir;        // empty: default_tokenizer_dir()
  bool force = false;               // replace an existing checkpoint directory
};

// The Qwen3 tokenizer files shipped with Troupe: <exe dir>/../share/troupe/qwen3-tokenizer in an
// installed tree, else the source tree's models/qwen3-tokenizer. Throws invalid_argument when
// neither holds tokenizer.json.
std::string default_tokenizer_dir();

struct random_checkpoint_summary {
  int64_t num_parameters = 0;
  uint64_t weight_bytes = 0;  // size of model.safetensors
};

// Writes out_dir/{config.json, generation_config.json, model.safetensors, tokenizer files}.
// Atomic: everything goes to a temporary sibling directory renamed to out_dir at the end, so an
// interrupted run never leaves a directory that loads. out_dir must not exist, be empty, or
// (with force) hold a config.json (an earlier checkpoint). Linear and embedding weights are
// normal(0, 0.02) (transformers' initializer_range); norm weights 1 + 0.1 * normal, so that a
// random model's activations and logits keep a useful spread.
random_checkpoint_summary write_random_checkpoint(const std::string& out_dir,
                                                  const model_config& config,
                                                  const generation_defaults& generation,
                                                  const random_checkpoint_options& options);

namespace detail {
inline uint64_t mix64(uint64_t z) noexcept {  // splitmix64's finaliser
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
}  // namespace detail

// Element `index` of the standard normal stream `key` (~N(0, 1): a sum of four 16-bit uniforms,
// bounded by +-3.46). Inline so the writer's loop vectorises; tests check written bytes with it.
inline float random_normal(uint64_t key, uint64_t index) noexcept {
  uint64_t bits = detail::mix64(key + (index + 1) * 0x9e3779b97f4a7c15ull);
  uint32_t sum = static_cast<uint32_t>(bits & 0xffff) + static_cast<uint32_t>((bits >> 16) & 0xffff) +
                 static_cast<uint32_t>((bits >> 32) & 0xffff) + static_cast<uint32_t>(bits >> 48);
  // Four uniforms on [0, 65535]: mean 131070, standard deviation 65536 / sqrt(3).
  constexpr float inv_sd = 1.7320508075688772f / 65536.0f;
  return (static_cast<float>(sum) - 131070.0f) * inv_sd;
}
// The stream of one tensor: a hash of the seed and the tensor's name.
uint64_t random_tensor_key(uint64_t seed, std::string_view tensor_name) noexcept;

}  // namespace troupe
