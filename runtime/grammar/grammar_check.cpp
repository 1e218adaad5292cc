#include "runtime/grammar/grammar_check.hpp"

#include <vector>

namespace troupe::grammar {

std::optional<uint32_t> find_empty_loop(const grammar& g) {
  const size_t n = g.rules.size();
  // nullable[r]: r matches the empty string. A fixpoint: an alternative is nullable when all of
  // its elements are references to nullable rules.
  std::vector<char> nullable(n, 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      for (uint32_t start : g.rules[r]) {
        bool all = true;
        for (uint32_t p = start; g.elements[p].k != element::kind::end; ++p) {
          const element& e = g.elements[p];
          if (e.k == element::kind::bytes || !nullable[e.index]) {
            all = false;
            break;
          }
        }
        if (all) {
          nullable[r] = 1;
          changed = true;
          break;
        }
      }
    }
  }
  // r -> s when s can be the first thing r expands to (everything before it nullable).
  std::vector<std::vector<uint32_t>> first(n);
  for (size_t r = 0; r < n; ++r)
    for (uint32_t start : g.rules[r])
      for (uint32_t p = start; g.elements[p].k == element::kind::rule; ++p) {
        first[r].push_back(g.elements[p].index);
        if (!nullable[g.elements[p].index]) break;
      }
  // A cycle in that graph is a loop that consumes nothing: iterative DFS with colours.
  std::vector<uint8_t> colour(n, 0);  // 0 new, 1 on the path, 2 done
  std::vector<std::pair<uint32_t, size_t>> path;
  for (uint32_t s = 0; s < n; ++s) {
    if (colour[s]) continue;
    path.push_back({s, 0});
    colour[s] = 1;
    while (!path.empty()) {
      auto& [r, next] = path.back();
      if (next == first[r].size()) {
        colour[r] = 2;
        path.pop_back();
        continue;
      }
      const uint32_t t = first[r][next++];
      if (colour[t] == 1) return t;
      if (colour[t] == 0) {
        colour[t] = 1;
        path.push_back({t, 0});
      }
    }
  }
  return std::nullopt;
}

}  // namespace troupe::grammar
