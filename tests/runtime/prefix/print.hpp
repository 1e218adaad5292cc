// Boost.Test printers for the prefix-cache types (found by ADL), so failures show values.
#pragma once

#include <ostream>

#include "runtime/prefix/block_codec.hpp"
#include "runtime/prefix/block_hash.hpp"
#include "runtime/prefix/kv_store.hpp"

namespace troupe::prefix {
inline std::ostream& operator<<(std::ostream& os, const block_hash& h) { return os << h.hex(); }
inline std::ostream& operator<<(std::ostream& os, check_status s) { return os << to_string(s); }
inline std::ostream& operator<<(std::ostream& os, store_status s) { return os << to_string(s); }
}  // namespace troupe::prefix
