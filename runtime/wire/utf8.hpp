// Strict UTF-8 validation (RFC 3629): no overlong forms, no surrogates, nothing above U+10FFFF.
// Every string that crosses the wire is checked with it before it reaches the tokenizer.
#pragma once

#include <cstddef>
#include <string_view>

namespace troupe::wire {

// Length of the longest valid UTF-8 prefix of `s` (== s.size() when all of it is valid).
size_t valid_utf8_prefix(std::string_view s) noexcept;
inline bool is_valid_utf8(std::string_view s) noexcept { return valid_utf8_prefix(s) == s.size(); }

}  // namespace troupe::wire
