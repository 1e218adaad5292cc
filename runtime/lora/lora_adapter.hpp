// LoRA adapters as PEFT saves them (adapter_config.json + adapter_model.safetensors): a low-rank
// update y += scaling * B (A x) on a Qwen3 model's attention and MLP projections, applied per
// sequence so that requests for different adapters share one batch (docs/lora.md).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/kernels.hpp"
#include "runtime/model/config.hpp"

namespace troupe {

// The projections a LoRA pair can target, in the order the engine names them.
enum class lora_target : uint8_t { q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj };
inline constexpr int kLoraTargets = 7;
const char* to_string(lora_target t) noexcept;

// One projection's pair, widened to float32 at load: A [rank, in], B [out, rank].
struct lora_pair {
  int64_t rank = 0;  // 0: this projection has no pair
  int64_t in = 0, out = 0;
  float scaling = 0;  // lora_alpha / rank (lora_alpha / sqrt(rank) with use_rslora)
  std::vector<float> a, b;
  kernels::weight_ref a_ref() const { return {a.data(), dtype::f32, rank, in}; }
  kernels::weight_ref b_ref() const { return {b.data(), dtype::f32, out, rank}; }
};

struct lora_adapter {
  std::string name;      // what requests call it (troupe serve --lora NAME=DIR); the directory's name by default
  std::string dir;
  std::string identity;  // 16 hex digits over the scalings, shapes and values: the prefix cache's key part
  double lora_alpha = 0;
  int64_t r = 0;         // adapter_config.json's r (a pair's rank may differ under rank_pattern)
  bool use_rslora = false;
  std::vector<std::array<lora_pair, kLoraTargets>> layers;  // [num_hidden_layers]
  int64_t pairs = 0;                                        // pairs present
  size_t bytes() const noexcept;                            // float32 bytes held
  int64_t max_rank() const noexcept;                        // the highest rank of its pairs (rank_pattern too)

  const lora_pair* pair(int64_t layer, lora_target t) const noexcept {
    const lora_pair& p = layers[static_cast<size_t>(layer)][static_cast<size_t>(t)];
    return p.rank > 0 ? &p : nullptr;
  }
};

// Each layer's [out, in] per target, from the checkpoint's tensor layout (tensor_layout.hpp);
// {0, 0} where the layer has no such dense projection (a mixture-of-experts layer's MLP).
std::vector<std::array<std::pair<int64_t, int64_t>, kLoraTargets>> lora_target_shapes(const model_config& cfg);

// Loads a PEFT LoRA directory for a model of config `cfg`. Tensors may be F32, BF16 or F16 (kept
// as float32). Throws troupe::error naming the file and the field or tensor: io_error when a
// file cannot be read; invalid_checkpoint for malformed JSON, a missing or ill-typed field, a
// tensor whose name is not a LoRA A/B of a projection or whose shape does not fit the model, an A
// without its B; unsupported for what Troupe does not apply (DoRA, bias, modules_to_save,
// alpha_pattern, layer_replication, fan_in_fan_out, LoRA on embeddings, lm_head or MoE experts).
lora_adapter load_lora_adapter(const std::string& dir, const model_config& cfg, std::string name = {});

// vLLM's max_lora_rank: throws troupe::error(invalid_argument) naming the adapter, its rank and the
// limit when a pair's rank exceeds max_rank (0 = any). `setting` names the limit in the message.
void check_lora_rank(const lora_adapter& a, int64_t max_rank, std::string_view setting);

}  // namespace troupe
