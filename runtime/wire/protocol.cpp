#include "runtime/wire/protocol.hpp"

#include <array>

namespace troupe::wire {

namespace {
constexpr std::array<std::string_view, num_error_codes> error_names = {
    "malformed",     "frame_too_large",   "unsupported_version", "unknown_type",
    "unknown_field", "missing_field",     "wrong_type",          "invalid_value",
    "invalid_utf8",  "duplicate_id",      "unknown_id",          "prompt_too_long",
    "too_many_requests", "unsupported",   "shutting_down",       "forbidden",
    "idle_timeout",      "internal",
};
constexpr std::array<std::string_view, 5> finish_names = {"stop", "length", "cancelled",
                                                          "deadline", "error"};
}  // namespace

std::string_view to_string(error_code code) noexcept {
  return error_names[static_cast<size_t>(code)];
}

std::optional<error_code> parse_error_code(std::string_view name) noexcept {
  for (size_t i = 0; i < error_names.size(); ++i)
    if (error_names[i] == name) return static_cast<error_code>(i);
  return std::nullopt;
}

std::string_view to_string(finish_reason r) noexcept { return finish_names[static_cast<size_t>(r)]; }

std::optional<finish_reason> parse_finish_reason(std::string_view name) noexcept {
  for (size_t i = 0; i < finish_names.size(); ++i)
    if (finish_names[i] == name) return static_cast<finish_reason>(i);
  return std::nullopt;
}

}  // namespace troupe::wire
