#include "runtime/core/error.hpp"

#include <cstdio>
#include <cstdlib>

namespace troupe {

std::string_view to_string(errc code) noexcept {
  switch (code) {
    case errc::invalid_argument: return "invalid_argument";
    case errc::invalid_checkpoint: return "invalid_checkpoint";
    case errc::unsupported: return "unsupported";
    case errc::io_error: return "io_error";
    case errc::invalid_input: return "invalid_input";
    case errc::out_of_range: return "out_of_range";
    case errc::resource_exhausted: return "resource_exhausted";
    case errc::internal: return "internal";
  }
  return "unknown";
}

void throw_error(errc code, const std::string& message) { throw error(code, message); }

namespace detail {
void assert_failed(const char* expr, const char* file, int line) {
  std::fprintf(stderr, "troupe: invariant failed: %s (%s:%d)\n", expr, file, line);
  std::abort();
}
}  // namespace detail

}  // namespace troupe
