// Copies one block's K/V between the paged pool and a flat payload (kv_layout's order: per layer,
// K then V, each its codes then, in an INT8 / FP8 pool, its per-token scales). Runs on the
// executor's thread between steps, the only thread that touches the pool.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "runtime/core/dtype.hpp"
#include "runtime/kv/block_allocator.hpp"
#include "runtime/kv/kv_cache.hpp"
#include "runtime/prefix/block_codec.hpp"

namespace troupe::prefix {

// The payload layout of `kv`'s blocks; kv_dtype is the pool's ("f32", "int8", "fp8_e4m3").
kv_layout layout_of(const kv_cache& kv);
// The same for a pool of this model, block size and element type, without making one.
kv_layout layout_for(const model_config& config, int32_t block_size, dtype kv_type = dtype::f32);
// Appends block `b`'s payload (layout_of(kv).payload_bytes() bytes) to `out`.
void gather_block(const kv_cache& kv, block_id b, std::string& out);
// Writes `payload` into block `b`. Throws troupe::error(invalid_argument) when its size is not
// the layout's payload size or b is outside the pool: nothing is written then.
void scatter_block(kv_cache& kv, block_id b, std::string_view payload);

// The same for the pools of a tensor-parallel group (tensor_parallel_runner::pools(), rank order:
// rank r holds KV heads [r * H / n, (r + 1) * H / n) of every block, or, with `replicas` > 1 (a
// group larger than H: tensor_parallel_runner::kv_replicas()), each run of `replicas` ranks holds
// the same head). The payload is the one a single pool of the whole model would give, so replicas
// of any group size share cache entries: gather reads the first of each run, scatter writes all.
kv_layout layout_of(std::span<const kv_cache* const> ranks, int32_t replicas = 1);
void gather_block(std::span<const kv_cache* const> ranks, block_id b, std::string& out, int32_t replicas = 1);
void scatter_block(std::span<kv_cache* const> ranks, block_id b, std::string_view payload, int32_t replicas = 1);

}  // namespace troupe::prefix
