// Added tokens (<|im_start|>, <think>, ...): found in the raw text before normalisation and
// pre-tokenisation, leftmost-longest as Hugging Face's AddedVocabulary does, and never split.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/tokenizer/utf8.hpp"  // npos

namespace troupe::tok {

struct added_token {
  int32_t id = -1;
  std::string content;
  bool special = false;  // skipped by decode(skip_special_tokens = true)
};

class added_token_matcher {
 public:
  added_token_matcher() = default;
  explicit added_token_matcher(const std::vector<added_token>& tokens);

  struct match {
    size_t offset;  // npos: none
    size_t length;
    int32_t id;
  };
  // The leftmost match at or after `from`; among matches there, the longest.
  match find(std::string_view text, size_t from) const;
  bool empty() const { return entries_.empty(); }

 private:
  struct entry {
    std::string content;
    int32_t id;
  };
  std::vector<entry> entries_;              // longest first
  std::vector<uint16_t> by_first_byte_[256];  // indices into entries_, longest first
  bool first_byte_[256] = {};
  int single_first_byte_ = -1;  // when every token starts with the same byte: memchr for it
};

}  // namespace troupe::tok
