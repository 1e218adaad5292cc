// A tensor-parallel rank's share of a LoRA adapter (vLLM's column- and row-parallel LoRA layers):
// where the base projection's output rows are split (q, k, v, gate, up), the rank keeps B's rows
// for its slice and A whole; where its input columns are split (o, down), it keeps A's columns for
// its slice and B whole, so B (A_r x_r) is a partial sum that the all-reduce after the projection
// completes. The split follows runtime/model/shard.hpp's.
#pragma once

#include <cstdint>

#include "runtime/lora/lora_adapter.hpp"

namespace troupe {

// Rank `rank` of `size` (the model must be shardable: shard.hpp's check_shardable). A mixture-of-
// experts layer carries no MLP pairs (LoRA on experts is refused at load), so expert parallelism
// changes nothing here. Throws troupe::error(invalid_argument) for a rank outside the group or an
// adapter loaded for another layer count.
lora_adapter shard_lora_adapter(const lora_adapter& full, const model_config& cfg, int32_t rank, int32_t size);

}  // namespace troupe
