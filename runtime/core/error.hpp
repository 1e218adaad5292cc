// troupe::error: the one exception type of runtime code; carries a machine-readable code and
// a message that says what to change. Actors and the CLI catch it at their boundary.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace troupe {

enum class errc {
  invalid_argument,    // a caller passed a value outside its documented range
  invalid_checkpoint,  // a model directory or file is malformed
  unsupported,         // well-formed but not something Troupe implements
  io_error,            // the operating system refused (open, mmap, read)
  invalid_input,       // user data (prompt bytes, ids) is malformed
  out_of_range,        // an index or length exceeds a limit (vocab, max_model_len)
  resource_exhausted,  // no KV blocks, queue full, ...
  internal,            // an invariant broke: a bug in Troupe
};

std::string_view to_string(errc code) noexcept;

class error : public std::runtime_error {
 public:
  error(errc code, const std::string& message) : std::runtime_error(message), code_(code) {}
  errc code() const noexcept { return code_; }

 private:
  errc code_;
};

[[noreturn]] void throw_error(errc code, const std::string& message);

}  // namespace troupe

// Invariant check kept on in every build type (tier 3 of style.md): a broken invariant is a bug.
#define TROUPE_ASSERT(cond)                                                                    \
  do {                                                                                         \
    if (!(cond)) ::troupe::detail::assert_failed(#cond, __FILE__, __LINE__);                   \
  } while (0)

namespace troupe::detail {
[[noreturn]] void assert_failed(const char* expr, const char* file, int line);
}
