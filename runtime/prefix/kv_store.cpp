#include "runtime/prefix/kv_store.hpp"

namespace troupe::prefix {

std::string_view to_string(store_status s) noexcept {
  switch (s) {
    case store_status::ok: return "ok";
    case store_status::unavailable: return "unavailable";
    case store_status::timeout: return "timeout";
    case store_status::error: return "error";
  }
  return "?";
}

}  // namespace troupe::prefix
