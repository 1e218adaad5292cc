#include "runtime/grammar/token_table.hpp"

#include <algorithm>

namespace troupe::grammar {

token_table::token_table(std::vector<std::string> bytes) : bytes_(std::move(bytes)) {
  // Sort ids by their bytes; then every trie node is a run of ids sharing a prefix, and its
  // children are the sub-runs split by the next byte. Nodes are laid out breadth-first so that
  // each node's children are contiguous.
  std::vector<int32_t> order;
  for (size_t id = 0; id < bytes_.size(); ++id)
    if (!bytes_[id].empty()) order.push_back(static_cast<int32_t>(id));
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return bytes_[static_cast<size_t>(a)] < bytes_[static_cast<size_t>(b)];
  });
  struct run {
    size_t begin, end, depth;
  };
  std::vector<run> runs{{0, order.size(), 0}};  // runs[i] belongs to nodes_[i]
  nodes_.push_back({});
  for (size_t i = 0; i < runs.size(); ++i) {
    const run r = runs[i];
    size_t b = r.begin;
    // The id whose bytes end here sorts first in its run (a prefix sorts before its extensions).
    // Equal bytes under two ids keep the first; the other is never allowed.
    while (b < r.end && bytes_[static_cast<size_t>(order[b])].size() == r.depth) {
      if (nodes_[i].token < 0) nodes_[i].token = order[b];
      ++b;
    }
    nodes_[i].first_child = static_cast<uint32_t>(nodes_.size());
    while (b < r.end) {
      const char c = bytes_[static_cast<size_t>(order[b])][r.depth];
      size_t e = b;
      while (e < r.end && bytes_[static_cast<size_t>(order[e])][r.depth] == c) ++e;
      node child;
      child.byte = static_cast<uint8_t>(c);
      nodes_.push_back(child);
      runs.push_back({b, e, r.depth + 1});
      ++nodes_[i].num_children;
      b = e;
    }
  }
}

}  // namespace troupe::grammar
