// The vocabulary as the grammar matcher sees it: each ordinary token's bytes, in a trie so that
// one walk visits every token sharing a prefix once. Special tokens (<|im_end|>, ...) have no
// bytes here: the grammar never produces them (end ids are handled by the matcher).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace troupe {
class tokenizer;
}

namespace troupe::grammar {

class token_table {
 public:
  struct node {
    uint32_t first_child = 0;  // children are nodes [first_child, first_child + num_children)
    uint32_t num_children = 0;
    int32_t token = -1;        // the token whose bytes end here, -1: none
    uint8_t byte = 0;          // the byte on the edge into this node
  };
  // bytes[id]: the token's bytes; empty: never allowed by a grammar (special or unused ids).
  explicit token_table(std::vector<std::string> bytes);
  // Every id of the tokenizer; special tokens get no bytes.
  static std::shared_ptr<const token_table> from_tokenizer(const tokenizer& tok);

  size_t id_limit() const noexcept { return bytes_.size(); }
  std::string_view bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }
  const std::vector<node>& nodes() const noexcept { return nodes_; }  // nodes()[0]: the root

 private:
  std::vector<std::string> bytes_;
  std::vector<node> nodes_;
};

}  // namespace troupe::grammar
