// Building GBNF text: what the converters (JSON schema, number ranges) share.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace troupe::grammar {

// The non-empty parts, separated by `sep` (" " for a sequence, " | " for alternatives).
inline std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (const std::string& p : parts) {
    if (p.empty()) continue;
    if (!out.empty()) out += sep;
    out += p;
  }
  return out;
}

}  // namespace troupe::grammar
