// Static checks of a built grammar that the matcher relies on.
#pragma once

#include <cstdint>
#include <optional>

#include "runtime/grammar/grammar.hpp"

namespace troupe::grammar {

// A rule that can reach itself without consuming a byte (left recursion, or a repetition of
// something that matches the empty string), if any: expanding it would never end.
std::optional<uint32_t> find_empty_loop(const grammar& g);

}  // namespace troupe::grammar
