#include "runtime/lora/lora_shard.hpp"

#include <algorithm>
#include <string>

#include "runtime/core/error.hpp"
#include "runtime/model/shard.hpp"

namespace troupe {

namespace {

// B's rows [r0, r0 + n): the rank's outputs.
lora_pair output_rows(const lora_pair& p, int64_t r0, int64_t n) {
  lora_pair s = p;
  s.out = n;
  s.b.assign(p.b.begin() + r0 * p.rank, p.b.begin() + (r0 + n) * p.rank);
  return s;
}

// A's columns [c0, c0 + n): the rank's inputs.
lora_pair input_columns(const lora_pair& p, int64_t c0, int64_t n) {
  lora_pair s = p;
  s.in = n;
  s.a.resize(static_cast<size_t>(p.rank * n));
  for (int64_t r = 0; r < p.rank; ++r)
    std::copy_n(p.a.begin() + r * p.in + c0, n, s.a.begin() + r * n);
  return s;
}

}  // namespace

lora_adapter shard_lora_adapter(const lora_adapter& full, const model_config& cfg, int32_t rank, int32_t size) {
  if (size < 1 || rank < 0 || rank >= size)
    throw_error(errc::invalid_argument,
                "shard_lora_adapter: rank " + std::to_string(rank) + " outside a group of " + std::to_string(size));
  if (static_cast<int64_t>(full.layers.size()) != cfg.num_hidden_layers)
    throw_error(errc::invalid_argument, "shard_lora_adapter: LoRA adapter '" + full.name + "' was not loaded for this model's " +
                                            std::to_string(cfg.num_hidden_layers) + " layers");
  lora_adapter s;
  s.name = full.name;
  s.dir = full.dir;
  s.identity = full.identity;  // the same adapter: the prefix cache keys it so (the group size is keyed apart)
  s.lora_alpha = full.lora_alpha;
  s.r = full.r;
  s.use_rslora = full.use_rslora;
  s.pairs = full.pairs;
  s.layers.resize(full.layers.size());
  const int64_t q = cfg.num_attention_heads / size * cfg.head_dim;
  const int64_t kv = kv_heads_per_rank(cfg.num_key_value_heads, size) * cfg.head_dim;
  const int64_t kv0 = kv_head_begin(cfg.num_key_value_heads, rank, size) * cfg.head_dim;
  const int64_t inter = cfg.intermediate_size / size;
  for (size_t l = 0; l < full.layers.size(); ++l)
    for (int t = 0; t < kLoraTargets; ++t) {
      const lora_pair& p = full.layers[l][static_cast<size_t>(t)];
      lora_pair& o = s.layers[l][static_cast<size_t>(t)];
      if (p.rank == 0) continue;
      switch (static_cast<lora_target>(t)) {
        case lora_target::q_proj: o = output_rows(p, rank * q, q); break;
        case lora_target::k_proj:
        case lora_target::v_proj: o = output_rows(p, kv0, kv); break;
        case lora_target::o_proj: o = input_columns(p, rank * q, q); break;
        case lora_target::gate_proj:
        case lora_target::up_proj: o = output_rows(p, rank * inter, inter); break;
        case lora_target::down_proj: o = input_columns(p, rank * inter, inter); break;
      }
    }
  return s;
}

}  // namespace troupe
