// Copies one block's K/V between the paged pool and a flat payload (kv_layout's order: per layer,
// K then V). Runs on the executor's thread between steps, the only thread that touches the pool.
#pragma once

#include <string>
#include <string_view>

#include "runtime/kv/block_allocator.hpp"
#include "runtime/kv/kv_cache.hpp"
#include "runtime/prefix/block_codec.hpp"

namespace troupe::prefix {

// The payload layout of `kv`'s blocks (float32 K/V today: kv_dtype "f32").
kv_layout layout_of(const kv_cache& kv);
// Appends block `b`'s payload (layout_of(kv).payload_bytes() bytes) to `out`.
void gather_block(const kv_cache& kv, block_id b, std::string& out);
// Writes `payload` into block `b`. Throws troupe::error(invalid_argument) when its size is not
// the layout's payload size or b is outside the pool: nothing is written then.
void scatter_block(kv_cache& kv, block_id b, std::string_view payload);

}  // namespace troupe::prefix
