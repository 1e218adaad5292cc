// Added-token matching (see added_tokens.hpp). With a few dozen tokens, checking the candidates
// that start with the current byte (found with memchr when, as in Qwen, all start with '<')
// is simpler than an Aho-Corasick automaton and as fast on text with few '<'.
#include "runtime/tokenizer/added_tokens.hpp"

#include <algorithm>
#include <cstring>

#include "runtime/core/error.hpp"
#include "runtime/tokenizer/utf8.hpp"

namespace troupe::tok {

added_token_matcher::added_token_matcher(const std::vector<added_token>& tokens) {
  for (const added_token& t : tokens) {
    if (t.content.empty()) throw_error(errc::invalid_checkpoint, "added token " + std::to_string(t.id) + " is empty");
    entries_.push_back({t.content, t.id});
  }
  std::stable_sort(entries_.begin(), entries_.end(),
                   [](const entry& a, const entry& b) { return a.content.size() > b.content.size(); });
  if (entries_.size() > UINT16_MAX) throw_error(errc::unsupported, "more than 65535 added tokens");
  for (size_t i = 0; i < entries_.size(); ++i) {
    auto b = static_cast<uint8_t>(entries_[i].content[0]);
    by_first_byte_[b].push_back(static_cast<uint16_t>(i));
    first_byte_[b] = true;
  }
  int distinct = 0;
  for (int b = 0; b < 256; ++b) {
    if (!first_byte_[b]) continue;
    ++distinct;
    single_first_byte_ = b;
  }
  if (distinct != 1) single_first_byte_ = -1;
}

added_token_matcher::match added_token_matcher::find(std::string_view text, size_t from) const {
  const char* s = text.data();
  const size_t n = text.size();
  for (size_t i = from; i < n; ++i) {
    if (single_first_byte_ >= 0) {
      const void* hit = std::memchr(s + i, single_first_byte_, n - i);
      if (!hit) break;
      i = static_cast<size_t>(static_cast<const char*>(hit) - s);
    }
    auto b = static_cast<uint8_t>(s[i]);
    if (!first_byte_[b]) continue;
    for (uint16_t k : by_first_byte_[b]) {
      const std::string& c = entries_[k].content;
      if (c.size() <= n - i && std::memcmp(s + i, c.data(), c.size()) == 0) return {i, c.size(), entries_[k].id};
    }
  }
  return {npos, 0, -1};
}

}  // namespace troupe::tok
